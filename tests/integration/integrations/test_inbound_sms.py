"""The provider's inbound SMS webhook: signature checked, STOP/START applied, every change recorded."""

import uuid

import pytest
from django.test import Client

from contacts.models import ConsentChange
from integrations.domain.sms import OPT_OUT_KEYWORDS
from integrations.infrastructure.twilio import twilio_signature
from tests.factories import AccountFactory, ContactFactory

pytestmark = pytest.mark.django_db

PATH = "/hooks/twilio/sms/"
TOKEN = "inbound-auth-token-3c1d"


@pytest.fixture
def inbound(settings):
    settings.TWILIO_AUTH_TOKEN = TOKEN
    settings.TWILIO_ACCOUNT_SID = "AC" + "2" * 32
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    return settings


def post(
    body: str,
    from_number: str,
    *,
    signature: str | None = None,
    url: str = "https://relay.example" + PATH,
    message_sid: str | None = None,
):
    params = {
        "From": from_number,
        "To": "+15550100000",
        "Body": body,
        "MessageSid": message_sid or "SM" + uuid.uuid4().hex,
        "AccountSid": "AC" + "2" * 32,
    }
    if signature is None:
        signature = twilio_signature(TOKEN, url, {k: [v] for k, v in params.items()})
    return Client(enforce_csrf_checks=True).post(PATH, params, headers={"X-Twilio-Signature": signature})


@pytest.mark.parametrize("keyword", sorted(OPT_OUT_KEYWORDS))
def test_each_opt_out_keyword_opts_the_number_out_and_is_recorded(inbound, contact, keyword):
    response = post(f"  {keyword.lower()} ", contact.phone)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/xml")
    assert b"<Response></Response>" in response.content
    contact.refresh_from_db()
    assert contact.sms_opted_out
    change = ConsentChange.objects.get(contact=contact)
    assert (change.channel, change.opted_out, change.source) == ("sms", True, "inbound_sms")
    assert f"keyword {keyword}" in change.detail
    assert change.created_at is not None


@pytest.mark.parametrize("keyword", ["START", "unstop"])
def test_start_opts_back_in(inbound, contact, keyword):
    post("STOP", contact.phone)
    post(keyword, contact.phone)
    contact.refresh_from_db()
    assert not contact.sms_opted_out
    assert list(ConsentChange.objects.filter(contact=contact).order_by("id").values_list("opted_out", flat=True)) == [
        True,
        False,
    ]


def test_a_repeated_stop_changes_and_records_nothing_more(inbound, contact):
    post("STOP", contact.phone)
    post("stop", contact.phone)
    assert ConsentChange.objects.filter(contact=contact).count() == 1


def test_an_ordinary_reply_changes_nothing(inbound, contact):
    assert post("Stop sending me deals please", contact.phone).status_code == 200
    contact.refresh_from_db()
    assert not contact.sms_opted_out
    assert not ConsentChange.objects.exists()


def test_the_number_is_opted_out_in_every_account_but_no_one_else(inbound, contact):
    elsewhere = ContactFactory(account=AccountFactory(), phone=contact.phone)
    bystander = ContactFactory(account=contact.account)
    post("STOP", contact.phone)
    contact.refresh_from_db()
    elsewhere.refresh_from_db()
    bystander.refresh_from_db()
    assert contact.sms_opted_out
    assert elsewhere.sms_opted_out
    assert not bystander.sms_opted_out


def test_a_bad_signature_is_refused_and_changes_nothing(inbound, contact):
    assert post("STOP", contact.phone, signature="bm90IHRoZSBzaWduYXR1cmU=").status_code == 403
    assert post("STOP", contact.phone, signature="").status_code == 403
    signed_for_other_body = twilio_signature(TOKEN, "https://relay.example" + PATH, {"Body": ["START"]})
    assert post("STOP", contact.phone, signature=signed_for_other_body).status_code == 403
    contact.refresh_from_db()
    assert not contact.sms_opted_out
    assert not ConsentChange.objects.exists()


def test_a_signature_for_the_address_django_sees_is_accepted(inbound, contact):
    """Behind no proxy, Twilio signs the URL the request arrived at; that works too."""
    assert post("STOP", contact.phone, url="http://testserver" + PATH).status_code == 200
    contact.refresh_from_db()
    assert contact.sms_opted_out


def test_another_provider_account_is_refused(inbound, contact):
    inbound.TWILIO_ACCOUNT_SID = "AC" + "9" * 32
    assert post("STOP", contact.phone).status_code == 403


def test_without_an_auth_token_the_endpoint_is_unavailable(settings, contact):
    settings.TWILIO_AUTH_TOKEN = ""
    assert post("STOP", contact.phone, signature="anything").status_code == 503


def test_only_post_is_allowed(inbound):
    assert Client().get(PATH).status_code == 405


def test_stop_finds_a_contact_whose_phone_was_written_with_punctuation(inbound, account):
    from contacts.application.services import contact_create

    contact = contact_create(account_id=account.id, phone="+1 (555) 010-0077")
    assert post("STOP", "+15550100077").status_code == 200
    contact.refresh_from_db()
    assert contact.sms_opted_out
    assert ConsentChange.objects.filter(contact=contact, source="inbound_sms").count() == 1


def test_the_migration_respells_stored_phones(account):
    from django.apps import apps

    from contacts.models import Contact

    migration = __import__("contacts.migrations.0003_normalize_phones", fromlist=["normalize_stored_phones"])
    spelled = ContactFactory(account=account, phone="+15550100001")
    punctuated = ContactFactory(account=account, phone="+1 (555) 010-0002")
    nonsense = ContactFactory(account=account, phone="ask reception")
    migration.normalize_stored_phones(apps, None)
    phones = dict(Contact.objects.values_list("pk", "phone"))
    assert phones == {spelled.pk: "+15550100001", punctuated.pk: "+15550100002", nonsense.pk: "ask reception"}


def test_a_replayed_start_does_not_undo_a_later_stop(inbound, contact):
    assert post("START", contact.phone, message_sid="SM" + "1" * 32).status_code == 200
    assert post("STOP", contact.phone, message_sid="SM" + "2" * 32).status_code == 200
    replay = post("START", contact.phone, message_sid="SM" + "1" * 32)  # the same signed request, captured
    assert replay.status_code == 200  # the provider must not retry it
    contact.refresh_from_db()
    assert contact.sms_opted_out
    assert list(ConsentChange.objects.filter(contact=contact).values_list("opted_out", flat=True)) == [True]


def test_message_ids_past_the_replay_window_are_forgotten(inbound, contact):
    from datetime import timedelta

    from django.utils import timezone

    from integrations.application.inbound_sms import forget_inbound_messages
    from integrations.handlers import purge_inbound_sms
    from integrations.infrastructure.models import InboundSmsMessage
    from jobs.application.schedules import sync_schedules
    from jobs.infrastructure.models import Schedule

    post("STOP", contact.phone, message_sid="SM" + "3" * 32)
    post("START", contact.phone, message_sid="SM" + "4" * 32)
    InboundSmsMessage.objects.filter(message_sid="SM" + "3" * 32).update(
        received_at=timezone.now() - timedelta(days=400)
    )
    assert forget_inbound_messages(before=timezone.now() - timedelta(days=500)) == 0
    purge_inbound_sms({}, None)  # the scheduled job: INBOUND_SMS_REPLAY_WINDOW_DAYS (365) back
    assert list(InboundSmsMessage.objects.values_list("message_sid", flat=True)) == ["SM" + "4" * 32]
    sync_schedules()
    assert Schedule.objects.get(name="relay.purge_inbound_sms").handler == "integrations.purge_inbound_sms"


def test_an_ordinary_reply_becomes_an_sms_replied_event_once_per_message(inbound, contact):
    """One contact has the phone; whose reply it is among several: test_sms_replies.py."""
    from contacts.models import Event

    response = post("Yes please, book me in", contact.phone, message_sid="SM" + "7" * 32)
    assert response.status_code == 200
    again = post("Yes please, book me in", contact.phone, message_sid="SM" + "7" * 32)  # the provider retries
    assert again.status_code == 200
    (event,) = Event.objects.all()
    assert (event.contact_id, event.name) == (contact.pk, "sms.replied")
    assert event.data == {"body": "Yes please, book me in", "message": "SM" + "7" * 32}
    assert event.account_id == contact.account_id
    contact.refresh_from_db()
    assert not contact.sms_opted_out  # a reply is no keyword
    post("STOP", contact.phone)
    assert Event.objects.filter(contact=contact).count() == 1  # a keyword changes consent, it is no reply
