"""Email through a real SMTP server (aiosmtpd) in this process: parts, headers, unsubscribe link, SMTP errors."""

import re
import warnings

import pytest
from django.test import Client

from contacts.models import ConsentChange
from integrations.application.channels import email_channel
from integrations.domain.channels import EmailMessage, failure_details
from kernel.failures import NetworkFailure, ServerFailure, TimeoutFailure, ValidationFailure, classify
from tests.integration.integrations.servers import closed_port

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("error::DeprecationWarning")]


@pytest.fixture
def smtp_settings(settings, smtp_server):
    settings.MAILERS = smtp_server.mailers_setting()
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    settings.DEFAULT_FROM_EMAIL = "Relay <relay@relay.example>"
    return settings


def message_for(contact, **overrides) -> EmailMessage:
    fields = {
        "to": contact.email,
        "subject": "Spring sale",
        "text": "Hello Ada,\nour spring sale starts today.",
        "html": "<html><body><p>Hello Ada,</p><p>our spring sale starts today.</p></body></html>",
        "account_id": contact.account_id,
        "contact_id": contact.pk,
        **overrides,
    }
    return EmailMessage(**fields)


def test_sends_text_and_html_with_one_click_unsubscribe(smtp_settings, smtp_server, contact):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Django deprecation on this path
        result = email_channel().send_email(message_for(contact))

    assert result.channel == "email"
    assert result.provider == "smtp"
    assert result.status == "sent"
    (mail_from, recipients, _) = smtp_server.messages[0]
    assert mail_from == "relay@relay.example"
    assert recipients == [contact.email]
    received = smtp_server.parsed()
    assert received["Subject"] == "Spring sale"
    assert received["To"] == contact.email
    assert received["Message-ID"] == result.message_id
    assert result.message_id.endswith("@relay.example>")
    assert received.get_content_type() == "multipart/alternative"
    text = received.get_body(("plain",)).get_content()
    html = received.get_body(("html",)).get_content()

    header = received["List-Unsubscribe"]
    match = re.fullmatch(r"<(https://relay\.example/unsubscribe/[^/>]+/)>", header)
    assert match, header
    # As sent, on the wire: mailbox providers read the URL there, not RFC 2047 encoded words.
    raw = smtp_server.messages[0][2]
    assert f"List-Unsubscribe: {header}".encode() in raw
    link = match.group(1)
    assert received["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert "our spring sale starts today." in text
    assert f"Unsubscribe: {link}" in text
    assert f'<a href="{link}">Unsubscribe</a></p></body>' in html
    assert result.as_response_data()["message_id"] == result.message_id

    # A mailbox provider's one-click POST to the header's URL unsubscribes the contact.
    response = Client(enforce_csrf_checks=True).post(
        link.removeprefix("https://relay.example"), {"List-Unsubscribe": "One-Click"}
    )
    assert response.status_code == 200
    contact.refresh_from_db()
    assert contact.unsubscribed
    change = ConsentChange.objects.get(contact=contact)
    assert (change.channel, change.opted_out, change.source) == ("email", True, "unsubscribe_link")


def test_each_contact_gets_its_own_link(smtp_settings, smtp_server, contact, account):
    from tests.factories import ContactFactory

    other = ContactFactory(account=account)
    email_channel().send_email(message_for(contact))
    email_channel().send_email(message_for(other))
    first, second = smtp_server.parsed(0)["List-Unsubscribe"], smtp_server.parsed(1)["List-Unsubscribe"]
    assert first != second


def test_the_link_is_not_added_twice_when_the_body_already_shows_it(smtp_settings, smtp_server, contact):
    from integrations.application.unsubscribe import unsubscribe_url

    link = unsubscribe_url(contact.pk)
    email_channel().send_email(message_for(contact, text=f"Bye: {link}", html=None))
    received = smtp_server.parsed()
    assert received.get_content_type() == "text/plain"
    assert received.get_content().count(link) == 1


def test_without_a_contact_there_is_no_unsubscribe(smtp_settings, smtp_server, contact):
    result = email_channel().send_email(message_for(contact, contact_id=None, html=None))
    received = smtp_server.parsed()
    assert received["List-Unsubscribe"] is None
    assert "Unsubscribe" not in received.get_content()
    assert result.details == {"unsubscribe_link": False}


def test_the_sender_is_the_message_s_then_the_account_s_then_the_default(smtp_settings, smtp_server, contact):
    account = contact.account
    email_channel().send_email(message_for(contact))
    account.from_email = "Acme News <news@acme.example>"
    account.save(update_fields=["from_email"])
    email_channel().send_email(message_for(contact))
    email_channel().send_email(message_for(contact, from_email="ceo@acme.example"))
    assert [m[0] for m in smtp_server.messages] == ["relay@relay.example", "news@acme.example", "ceo@acme.example"]
    assert smtp_server.parsed(1)["From"] == "Acme News <news@acme.example>"


def test_custom_headers_pass_but_relay_s_own_cannot_be_overridden(smtp_settings, smtp_server, contact):
    email_channel().send_email(message_for(contact, headers={"X-Campaign": "spring"}))
    assert smtp_server.parsed()["X-Campaign"] == "spring"
    for name in ("List-Unsubscribe", "From", "Bcc"):
        with pytest.raises(ValidationFailure, match=f"headers: {name} is set by Relay"):
            email_channel().send_email(message_for(contact, headers={name: "x"}))
    assert len(smtp_server.messages) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"to": "not-an-address"}, "to: not a valid email address"),
        ({"to": ""}, "to: not a valid email address"),
        ({"subject": ""}, "subject: must not be empty"),
        ({"subject": "Hi\nBcc: everyone@example.com"}, "subject: must be on one line"),
        ({"text": "", "html": None}, "text: an email needs a text or an HTML body"),
        ({"from_email": "not an address\n"}, "from_email: not a valid sender address"),
        ({"headers": {"X-A": "one\ntwo"}}, "headers: the value of X-A must be one line"),
    ],
)
def test_bad_messages_are_validation_failures_and_nothing_is_sent(
    smtp_settings, smtp_server, contact, overrides, message
):
    with pytest.raises(ValidationFailure, match=message):
        email_channel().send_email(message_for(contact, **overrides))
    assert smtp_server.messages == []


@pytest.mark.parametrize(
    ("recipient", "kind", "code"),
    [
        ("unknown@example.com", ValidationFailure, 550),
        ("busy@example.com", ServerFailure, 451),
        ("reject-data@example.com", ValidationFailure, 554),
    ],
)
def test_smtp_replies_are_classified(smtp_settings, contact, recipient, kind, code):
    with pytest.raises(kind) as raised:
        email_channel().send_email(message_for(contact, to=recipient))
    assert str(code) in str(raised.value)
    assert classify(raised.value).retryable is (code < 500)
    assert failure_details(raised.value) == {"provider": "smtp", "smtp_code": code}


def test_a_refused_connection_is_retried(settings, contact):
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": closed_port(), "timeout": 2},
        }
    }
    with pytest.raises(NetworkFailure, match="refused the connection") as raised:
        email_channel().send_email(message_for(contact))
    assert classify(raised.value).retryable


def test_a_server_that_never_greets_times_out_and_is_retried(settings, silent_listener, contact):
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": silent_listener.port, "timeout": 0.5},
        }
    }
    with pytest.raises(TimeoutFailure) as raised:
        email_channel().send_email(message_for(contact))
    assert classify(raised.value).retryable


def test_the_smtp_password_never_reaches_the_error(settings, smtp_server, contact, caplog):
    """aiosmtpd offers no AUTH without TLS, so login fails; the error names the stage, never the password."""
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": "127.0.0.1",
                "port": smtp_server.port,
                "username": "relay",
                "password": "smtp-canary-pw-77",
                "timeout": 2,
            },
        }
    }
    with pytest.raises(ValidationFailure) as raised:
        email_channel().send_email(message_for(contact))
    assert "smtp-canary-pw-77" not in str(raised.value) + caplog.text
    assert "AUTH" in str(raised.value)


def test_under_the_test_runner_mail_goes_to_the_outbox(mailoutbox, contact):
    """What other apps' tests see: pytest-django's locmem mailer, with the same headers."""
    result = email_channel().send_email(message_for(contact))
    assert result.provider == "locmem"
    (sent,) = mailoutbox
    assert sent.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert sent.to == [contact.email]


@pytest.mark.parametrize("value", ["news@acme.example", "Acme News <news@acme.example>", ""])
def test_an_account_s_from_email_accepts_an_address_or_a_named_address(account, value):
    account.from_email = value
    account.full_clean()


@pytest.mark.parametrize("value", ["not an address", "Acme <news@>", "a@b.example\nBcc: x@y.example"])
def test_an_account_s_from_email_refuses_anything_else(account, value):
    from django.core.exceptions import ValidationError

    account.from_email = value
    with pytest.raises(ValidationError) as raised:
        account.full_clean()
    assert "from_email" in raised.value.message_dict
