"""The public unsubscribe page: a signed token, no login, GET confirms, POST (one-click) unsubscribes, idempotent."""

import pytest
from django.test import Client

from contacts.models import ConsentChange
from integrations.application.unsubscribe import unsubscribe_token, unsubscribe_url

pytestmark = pytest.mark.django_db


def path_for(contact) -> str:
    return f"/unsubscribe/{unsubscribe_token(contact.pk)}/"


def test_the_url_is_on_the_public_address(settings, contact):
    settings.RELAY_PUBLIC_URL = "https://mail.relay.example/"
    assert unsubscribe_url(contact.pk) == "https://mail.relay.example" + path_for(contact)


def test_get_shows_a_confirmation_and_changes_nothing(contact):
    response = Client().get(path_for(contact))
    assert response.status_code == 200
    assert b'<form method="post">' in response.content
    assert contact.email[0].encode() + b"***@example.com" in response.content
    assert contact.email.encode() not in response.content  # the page does not reveal the address
    assert response["Cache-Control"].startswith("max-age=0")
    contact.refresh_from_db()
    assert not contact.unsubscribed


def test_one_click_post_unsubscribes_without_login_or_csrf_token(contact):
    response = Client(enforce_csrf_checks=True).post(path_for(contact), {"List-Unsubscribe": "One-Click"})
    assert response.status_code == 200
    assert b"You are unsubscribed" in response.content
    contact.refresh_from_db()
    assert contact.unsubscribed
    change = ConsentChange.objects.get(contact=contact)
    assert (change.channel, change.opted_out, change.source, change.detail) == (
        "email",
        True,
        "unsubscribe_link",
        "one-click (RFC 8058)",
    )


def test_the_page_button_unsubscribes_too(contact):
    Client(enforce_csrf_checks=True).post(path_for(contact))
    assert ConsentChange.objects.get(contact=contact).detail == "unsubscribe page"


def test_twice_is_safe(contact):
    client = Client()
    first = client.post(path_for(contact), {"List-Unsubscribe": "One-Click"})
    second = client.post(path_for(contact), {"List-Unsubscribe": "One-Click"})
    assert first.status_code == second.status_code == 200
    assert b"already unsubscribed" in second.content
    assert ConsentChange.objects.filter(contact=contact).count() == 1


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_tampered_token_is_refused_and_changes_nothing(contact, method):
    token = unsubscribe_token(contact.pk)
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    response = getattr(Client(), method)(f"/unsubscribe/{forged}/")
    assert response.status_code == 400
    assert b"not valid" in response.content
    contact.refresh_from_db()
    assert not contact.unsubscribed


def test_a_token_signed_for_something_else_is_refused(contact):
    from django.core import signing

    other = signing.dumps({"c": contact.pk}, salt="some.other.purpose")
    assert Client().post(f"/unsubscribe/{other}/").status_code == 400


def test_a_deleted_contact_s_link_still_answers(contact):
    path = path_for(contact)
    contact.delete()
    assert Client().post(path, {"List-Unsubscribe": "One-Click"}).status_code == 200
    assert Client().get(path).status_code == 200


def test_other_methods_are_not_allowed(contact):
    assert Client().put(path_for(contact)).status_code == 405
