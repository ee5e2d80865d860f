"""Whose reply an inbound SMS is: the contact Relay last texted from the number it was sent to, in that contact's
account only; else the most recently updated contact with that phone, when one account has it. Through the
real path: SMS sent through the fake Twilio provider on loopback (a workflow's send_sms step, or the channel),
the reply posted, signed, to the webhook."""

import logging
import uuid

import pytest
from django.conf import settings
from django.test import Client

from contacts.application.services import contact_set_consent, contact_update
from contacts.domain.model import ConsentChannel, ConsentSource
from contacts.models import Contact, Event
from integrations.application.channels import sms_channel
from integrations.infrastructure.models import SmsConversation
from integrations.infrastructure.twilio import twilio_signature
from tests.factories import AccountFactory, ContactFactory

pytestmark = pytest.mark.django_db

PATH = "/hooks/twilio/sms/"
RELAY_NUMBER = "+15550100000"  # twilio_settings' TWILIO_FROM_NUMBER
PHONE = "+15557770001"


@pytest.fixture
def texting(twilio_settings):
    """Relay sends through the fake provider, and the provider's webhook is signed with its auth token."""
    twilio_settings.RELAY_PUBLIC_URL = "https://relay.example"
    return twilio_settings


def reply(body: str, from_number: str = PHONE, *, to: str = RELAY_NUMBER, message_sid: str | None = None):
    params = {
        "From": from_number,
        "To": to,
        "Body": body,
        "MessageSid": message_sid or "SM" + uuid.uuid4().hex,
        "AccountSid": settings.TWILIO_ACCOUNT_SID,
    }
    url = "https://relay.example" + PATH
    signature = twilio_signature(settings.TWILIO_AUTH_TOKEN, url, {k: [v] for k, v in params.items()})
    response = Client().post(PATH, params, headers={"X-Twilio-Signature": signature})
    assert response.status_code == 200
    return response


def text(contact, body: str = "Still coming on Friday?") -> None:
    """Relay texts the contact (as a send_sms step does: the account and contact given)."""
    result = sms_channel().send_sms(to=contact.phone, body=body, account_id=contact.account_id, contact_id=contact.pk)
    assert result.provider == "twilio"


def replied(*contacts) -> list[int]:
    """Which of `contacts` hold an sms.replied event."""
    having = set(Event.objects.filter(name="sms.replied").values_list("contact_id", flat=True))
    return [c.pk for c in contacts if c.pk in having]


def test_a_reply_goes_to_the_contact_last_texted_and_to_no_other_account(texting, fake_twilio):
    shop = AccountFactory()
    ada, ada_twin = ContactFactory(account=shop, phone=PHONE), ContactFactory(account=shop, phone=PHONE)
    elsewhere = ContactFactory(account=AccountFactory(), phone=PHONE)
    contact_update(contact_id=ada_twin.pk, fields={"first_name": "Twin"})  # the most recently updated one
    text(ada)
    assert fake_twilio.requests[-1].form["To"] == [PHONE]

    reply("Yes, see you then", message_sid="SM" + "a" * 32)
    assert replied(ada, ada_twin, elsewhere) == [ada.pk]
    (event,) = Event.objects.filter(name="sms.replied")
    assert (event.account_id, event.data) == (shop.pk, {"body": "Yes, see you then", "message": "SM" + "a" * 32})

    # Another account texts the same person from the same (shared) number: the next reply answers that one.
    text(elsewhere, "Your table is ready")
    reply("On my way")
    events = Event.objects.filter(name="sms.replied").order_by("occurred_at")
    assert [(e.contact_id, e.data["body"]) for e in events] == [
        (ada.pk, "Yes, see you then"),
        (elsewhere.pk, "On my way"),
    ]


def test_a_retried_delivery_counts_once_even_if_the_contacts_changed_meanwhile(texting):
    first = ContactFactory(phone=PHONE)
    second = ContactFactory(account=first.account, phone=PHONE)
    contact_update(contact_id=first.pk, fields={"first_name": "Newer"})
    reply("Hello?", message_sid="SM" + "b" * 32)
    assert replied(first, second) == [first.pk]  # nobody texted: the most recently updated contact
    contact_update(contact_id=second.pk, fields={"first_name": "Newest"})
    reply("Hello?", message_sid="SM" + "b" * 32)  # the provider retries its webhook
    assert Event.objects.filter(name="sms.replied").count() == 1


def test_with_no_conversation_and_the_phone_in_several_accounts_the_reply_goes_to_no_one(texting, caplog):
    mine, theirs = ContactFactory(phone=PHONE), ContactFactory(account=AccountFactory(), phone=PHONE)
    with caplog.at_level(logging.INFO, logger="relay.integrations.sms"):
        reply("Who is this?")
    assert replied(mine, theirs) == []
    assert "2 contacts with that phone in 2 accounts, no account can be told" in caplog.text
    assert PHONE not in caplog.text  # the phone is masked


def test_a_conversation_from_another_number_or_to_an_old_phone_does_not_count(texting):
    account = AccountFactory()
    texted, other = ContactFactory(account=account, phone=PHONE), ContactFactory(account=account, phone=PHONE)
    text(texted)
    contact_update(contact_id=other.pk, fields={"first_name": "Recent"})
    reply("Wrong number?", to="+15550109999")  # not the number Relay texted from
    assert replied(texted, other) == [other.pk]

    moved = ContactFactory(account=account, phone="+15557770002")
    text(moved)
    contact_update(contact_id=moved.pk, fields={"phone": PHONE})  # texted at its old phone
    Event.objects.all().delete()
    reply("Hi again")
    assert replied(texted, other, moved) == [texted.pk]


def test_a_reply_reaches_the_workflows_of_the_contact_it_answers_only(texting, account):
    from tests.integration.workflows.support import make_workflow
    from workflows.infrastructure.models import WorkflowExecution

    ada, twin = ContactFactory(account=account, phone=PHONE), ContactFactory(account=account, phone=PHONE)
    make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "replied"}}],
        trigger={"type": "event", "event": "sms.replied"},
    )
    contact_update(contact_id=ada.pk, fields={"first_name": "Recent"})  # the most recently updated
    text(twin)
    reply("Yes")
    assert list(WorkflowExecution.objects.values_list("contact_id", flat=True)) == [twin.pk]


@pytest.mark.django_db(transaction=True)
def test_a_send_sms_step_records_the_conversation_its_reply_continues(texting, fake_twilio):
    from tests.integration.workflows.support import make_workflow, run_due_jobs
    from workflows.application.runs.starting import start_run

    account = AccountFactory()
    ada, twin = ContactFactory(account=account, phone=PHONE), ContactFactory(account=account, phone=PHONE)
    contact_update(contact_id=twin.pk, fields={"first_name": "Twin"})
    workflow = make_workflow(account, [{"action_type": "send_sms", "config": {"body": "Hi {{ contact.first_name }}"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=ada.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert fake_twilio.requests[-1].form["Body"] == ["Hi Ada"]
    (conversation,) = SmsConversation.objects.all()
    assert (conversation.contact_id, conversation.account_id) == (ada.pk, account.pk)
    assert (conversation.from_number, conversation.to_number) == (RELAY_NUMBER, PHONE)
    assert conversation.last_message_id == run.logs.get().response_data["message_id"]
    reply("Thanks!")
    assert replied(ada, twin) == [ada.pk]


def test_stop_opts_the_number_out_everywhere_and_start_undoes_only_what_a_keyword_did(texting):
    account = AccountFactory()
    texted, twin = ContactFactory(account=account, phone=PHONE), ContactFactory(account=account, phone=PHONE)
    elsewhere = ContactFactory(account=AccountFactory(), phone=PHONE)
    told_staff = ContactFactory(account=AccountFactory(), phone=PHONE)
    contact_set_consent(
        contact_id=told_staff.pk, channel=ConsentChannel.SMS, opted_out=True, source=ConsentSource.ADMIN
    )
    text(texted)
    reply("STOP")  # a STOP means this phone must not be texted: every contact with it, every account
    assert set(Contact.objects.filter(phone=PHONE, sms_opted_out=True).values_list("pk", flat=True)) == {
        texted.pk,
        twin.pk,
        elsewhere.pk,
        told_staff.pk,
    }
    reply("START")
    still_out = set(Contact.objects.filter(phone=PHONE, sms_opted_out=True).values_list("pk", flat=True))
    assert still_out == {told_staff.pk}  # opted out by its account, not by a keyword: START does not undo that
    assert not Event.objects.exists()  # keywords are no replies
