"""Contact services: every write emits its event inside the writer's transaction."""

import pytest
from django.contrib.admin.sites import site
from django.core.exceptions import ValidationError
from django.db import transaction
from django.test import RequestFactory

from contacts.application import events
from contacts.application.services import (
    contact_add_tag,
    contact_create,
    contact_remove_tag,
    contact_set_consent,
    contact_update,
)
from contacts.domain.model import ConsentChannel, ConsentSource, ContactError
from contacts.models import ConsentChange, Contact


@pytest.fixture
def published(monkeypatch):
    seen: list[events.ContactEvent] = []
    monkeypatch.setattr(events, "_subscribers", [seen.append])
    return seen


@pytest.mark.django_db
def test_create_emits_created_and_one_tag_added_per_tag(account, published):
    contact = contact_create(
        account_id=account.pk, email="a@example.com", first_name="Ann", tags=["Trial", "trial", "VIP"]
    )
    assert contact.tags == ["trial", "vip"]
    assert [(e.name, e.data) for e in published] == [
        ("contact.created", {}),
        ("tag.added", {"tag": "trial"}),
        ("tag.added", {"tag": "vip"}),
    ]
    assert {e.contact_id for e in published} == {contact.pk}


@pytest.mark.django_db
def test_update_emits_only_when_something_changed(contact, published):
    contact_update(contact_id=contact.pk, fields={"first_name": contact.first_name})
    assert published == []
    updated = contact_update(contact_id=contact.pk, fields={"first_name": "Grace", "custom_fields": {"plan": "pro"}})
    assert (updated.first_name, updated.custom_fields) == ("Grace", {"plan": "pro"})
    assert [(e.name, sorted(e.data["changed"])) for e in published] == [
        ("contact.updated", ["custom_fields", "first_name"])
    ]
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"seats": 3}})
    assert Contact.objects.get(pk=contact.pk).custom_fields == {"plan": "pro", "seats": 3}  # merged


@pytest.mark.django_db
def test_contact_updated_names_the_custom_fields_whose_value_changed(contact, published):
    """So a workflow watching one custom field is not started or woken by a change of another."""
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro"}})
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro", "seats": 3}})
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"seats": 3}}, merge_custom_fields=False)
    contact_update(
        contact_id=contact.pk, fields={"custom_fields": {"plan": ""}}
    )  # absent -> empty: no value either way
    contact_update(contact_id=contact.pk, fields={"first_name": "Grace"})
    assert [e.data for e in published] == [
        {"changed": ["custom_fields"], "changed_custom_fields": ["plan"]},
        {"changed": ["custom_fields"], "changed_custom_fields": ["seats"]},
        {"changed": ["custom_fields"], "changed_custom_fields": ["plan"]},
        {"changed": ["custom_fields"], "changed_custom_fields": []},
        {"changed": ["first_name"]},
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "field"),
    [({"email": "not-an-email"}, "email"), ({"nickname": "x"}, "nickname"), ({"custom_fields": [1]}, "custom_fields")],
)
def test_bad_updates_name_the_field_and_change_nothing(contact, published, fields, field):
    before = Contact.objects.values().get(pk=contact.pk)
    with pytest.raises((ContactError, ValidationError)) as raised:
        contact_update(contact_id=contact.pk, fields=fields)
    assert field in str(raised.value)
    assert Contact.objects.values().get(pk=contact.pk) == before
    assert published == []


@pytest.mark.django_db
def test_tags_added_and_removed_once(contact, published):
    assert contact_add_tag(contact_id=contact.pk, tag=" Trial ")[1] is True
    assert contact_add_tag(contact_id=contact.pk, tag="trial")[1] is False
    assert contact_remove_tag(contact_id=contact.pk, tag="TRIAL")[1] is True
    assert contact_remove_tag(contact_id=contact.pk, tag="trial")[1] is False
    assert [(e.name, e.data) for e in published] == [("tag.added", {"tag": "trial"}), ("tag.removed", {"tag": "trial"})]


@pytest.mark.django_db
def test_consent_changes_are_recorded_once_with_their_source(contact):
    _, changed = contact_set_consent(
        contact_id=contact.pk,
        channel=ConsentChannel.SMS,
        opted_out=True,
        source=ConsentSource.INBOUND_SMS,
        detail="STOP",
    )
    assert changed
    _, again = contact_set_consent(
        contact_id=contact.pk, channel=ConsentChannel.SMS, opted_out=True, source=ConsentSource.INBOUND_SMS
    )
    assert not again
    assert Contact.objects.get(pk=contact.pk).sms_opted_out
    (change,) = ConsentChange.objects.filter(contact=contact)
    assert (change.channel, change.opted_out, change.source, change.detail) == ("sms", True, "inbound_sms", "STOP")


@pytest.mark.django_db
def test_email_is_unique_within_an_account_only(account, other_account):
    contact_create(account_id=account.pk, email="same@example.com")
    contact_create(account_id=other_account.pk, email="same@example.com")
    with pytest.raises(ContactError) as refused, transaction.atomic():
        contact_create(account_id=account.pk, email="same@example.com")
    assert refused.value.field == "email"  # the constraint, named for the caller (the API answers 400)
    assert Contact.objects.filter(email="same@example.com").count() == 2


@pytest.mark.django_db
def test_admin_edits_go_through_the_services(account, superuser, published):
    admin = site._registry[Contact]
    request = RequestFactory().post("/")
    request.user = superuser
    form_class = admin.get_form(request)
    form = form_class(
        data={
            "account": account.pk,
            "email": "new@example.com",
            "phone": "",
            "first_name": "N",
            "last_name": "",
            "custom_fields": "{}",
            "tags": '["trial"]',
        }
    )
    assert form.is_valid(), form.errors
    obj = form.save(commit=False)
    admin.save_model(request, obj, form, change=False)
    assert [e.name for e in published] == ["contact.created", "tag.added"]
    contact = Contact.objects.get(email="new@example.com")

    published.clear()
    form = form_class(
        instance=contact,
        data={
            "account": account.pk,
            "email": "new@example.com",
            "phone": "",
            "first_name": "Nora",
            "last_name": "",
            "custom_fields": "{}",
            "tags": '["vip"]',
        },
    )
    assert form.is_valid(), form.errors
    admin.save_model(request, form.save(commit=False), form, change=True)
    assert [(e.name, e.data.get("tag")) for e in published] == [
        ("contact.updated", None),
        ("tag.added", "vip"),
        ("tag.removed", "trial"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("consent", "source", "error"),
    [
        ({ConsentChannel.EMAIL: "yes"}, ConsentSource.API, "unsubscribed"),
        ({"fax": True}, ConsentSource.API, "consent"),
        ({ConsentChannel.SMS: True}, None, "source"),
    ],
)
def test_an_update_whose_consent_is_refused_stores_nothing(contact, published, consent, source, error):
    """Fields and consent are one change: a bad consent value must not leave the fields written."""
    before = Contact.objects.values().get(pk=contact.pk)
    with pytest.raises(ValueError, match=error):
        contact_update(contact_id=contact.pk, fields={"first_name": "Grace"}, consent=consent, consent_source=source)
    assert Contact.objects.values().get(pk=contact.pk) == before
    assert not ConsentChange.objects.filter(contact=contact).exists()
    assert published == []


@pytest.mark.django_db
def test_consent_given_with_an_update_is_recorded_once_and_listed_nowhere_else(contact, published):
    updated = contact_update(
        contact_id=contact.pk,
        fields={"first_name": "Grace"},
        consent={ConsentChannel.EMAIL: True, ConsentChannel.SMS: False},
        consent_source=ConsentSource.API,
    )
    assert (updated.first_name, updated.unsubscribed, updated.sms_opted_out) == ("Grace", True, False)
    assert list(ConsentChange.objects.filter(contact=contact).values_list("channel", "opted_out", "source")) == [
        ("email", True, "api")
    ]  # SMS was already allowed: repeating the current state records nothing
    assert [(e.name, e.data) for e in published] == [("contact.updated", {"changed": ["first_name"]})]
    contact_update(contact_id=contact.pk, fields={}, consent={ConsentChannel.EMAIL: True}, consent_source="api")
    assert ConsentChange.objects.filter(contact=contact).count() == 1
