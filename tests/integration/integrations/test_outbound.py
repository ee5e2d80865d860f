"""The door and the ledger (integrations.application.outbound): every message is a ledger row written before the
provider is called, a retry never sends a `sent` message again and sends a `sending` one again with the same key,
and the sending rules (consent, address, windows, caps, test sends) answer Sent, Deferred or Refused. Against a
real SMTP server (aiosmtpd) and a Twilio-compatible HTTP server on loopback, on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from django.db import connection

from integrations.application.channels import email_channel, sms_channel
from integrations.application.outbound import (
    Deferred,
    Origin,
    Refused,
    Sent,
    SmsText,
    VoiceCall,
    send_message,
)
from integrations.application.sending_rules import sending_settings_set
from integrations.domain.channels import EmailMessage
from integrations.domain.sending import Purpose, Rule
from integrations.infrastructure.email import stable_message_id
from integrations.infrastructure.ledger import Ledger, NewMessage
from integrations.infrastructure.models import OutboundMessage
from kernel import clock
from kernel.failures import ValidationFailure
from tests.factories import ContactFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def smtp(settings, smtp_server):
    settings.MAILERS = smtp_server.mailers_setting()
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    return smtp_server


def email(to: str, subject: str = "Hello") -> EmailMessage:
    return EmailMessage(to=to, subject=subject, text="Hi there", from_email="Shop <shop@shop.example>")


def row(key: str) -> OutboundMessage:
    return OutboundMessage.objects.get(idempotency_key=key)


def message_ids(server) -> list[str]:
    return [str(server.parsed(i)["Message-ID"]) for i in range(len(server.messages))]


def age(key: str, hours: float) -> None:
    """Move a row's times back, as if it had been sent `hours` ago."""
    OutboundMessage.objects.filter(idempotency_key=key).update(
        sending_at=clock.now() - timedelta(hours=hours), created_at=clock.now() - timedelta(hours=hours)
    )


# --- the ledger row, before and after the provider call -----------------------------------------------------
def test_a_message_is_a_ledger_row_with_its_history_on_the_database_clock(smtp, account):
    contact = ContactFactory(account=account)
    job = uuid4()
    before = clock.now()
    outcome = send_message(
        key=f"job_{job}",
        content=email(contact.email),
        account_id=account.pk,
        contact_id=contact.pk,
        origin=Origin(workflow_id=7, step_key="welcome", job_id=job),
    )
    assert isinstance(outcome, Sent)
    assert not outcome.already_sent
    stored = row(f"job_{job}")
    assert (stored.status, stored.channel, stored.purpose, stored.provider) == ("sent", "email", "marketing", "smtp")
    assert (stored.account_id, stored.contact_id, stored.workflow_id, stored.step_key, stored.job_id) == (
        account.pk,
        contact.pk,
        7,
        "welcome",
        job,
    )
    assert stored.provider_calls == 1
    assert stored.address == contact.email
    assert [entry["status"] for entry in stored.history] == ["sending", "sent"]
    times = [datetime.fromisoformat(entry["at"]) for entry in stored.history]
    assert before <= times[0] <= times[1] <= clock.now()
    assert stored.sending_at is not None
    assert stored.sent_at is not None
    assert before <= stored.sending_at
    # The Message-ID is the key's: the same on every attempt of this message.
    (sent_id,) = message_ids(smtp)
    assert sent_id == stored.provider_message_id == stable_message_id(f"job_{job}", "shop.example")
    assert outcome.result.message_id == sent_id


def test_a_message_already_sent_is_never_sent_again(smtp, account):
    contact = ContactFactory(account=account)
    first = send_message(key="k-once", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    again = send_message(key="k-once", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(first, Sent)
    assert isinstance(again, Sent)
    assert again.already_sent
    assert again.message_id == first.message_id
    assert again.result.message_id == first.result.message_id
    assert len(smtp.messages) == 1
    assert row("k-once").provider_calls == 1


def test_a_retry_that_finds_its_row_sending_sends_again_with_the_same_message_id(smtp, account):
    """The attempt that wrote the row died after the server took the message and before the ledger knew: the
    retry cannot ask SMTP, so it sends again with the same Message-ID (a receiver that drops duplicates by
    Message-ID sees one message), and the row says it was resent."""
    contact = ContactFactory(account=account)
    key = "k-crashed"
    # What the dead attempt did: its row, committed before the call, then the call itself.
    Ledger().let_through(NewMessage(key, "email", "marketing", contact.email, account.pk, contact.pk))
    email_channel().send_email(
        EmailMessage(to=contact.email, subject="Hello", text="Hi", from_email="s@shop.example", idempotency_key=key)
    )
    outcome = send_message(key=key, content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Sent)
    assert outcome.resent
    first, second = message_ids(smtp)
    assert first == second == stable_message_id(key, "shop.example")
    stored = row(key)
    assert (stored.status, stored.provider_calls) == ("sent", 2)
    assert [entry["status"] for entry in stored.history] == ["sending", "sending", "sent"]
    assert "resent" in stored.history[1]["detail"]


def test_a_failed_call_is_recorded_failed_and_its_retry_goes_through_the_door_again(smtp, account):
    key = "k-refused-by-server"
    with pytest.raises(ValidationFailure):
        send_message(key=key, content=email("unknown@example.com"), account_id=account.pk)
    failed = row(key)
    assert (failed.status, failed.provider_calls) == ("failed", 1)
    assert "550" in failed.error or "RCPT" in failed.error
    with pytest.raises(ValidationFailure):
        send_message(key=key, content=email("unknown@example.com"), account_id=account.pk)
    again = row(key)
    assert (again.status, again.provider_calls) == ("failed", 2)
    assert [entry["status"] for entry in again.history] == ["sending", "failed", "sending", "failed"]
    assert smtp.messages == []


# --- consent and the address ---------------------------------------------------------------------------------
def test_consent_is_law_but_a_transactional_email_reaches_an_unsubscribed_contact(smtp, account):
    contact = ContactFactory(account=account, unsubscribed=True)
    refused = send_message(key="k-mkt", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(refused, Refused)
    assert (refused.rule, refused.code) == (Rule.CONSENT, "unsubscribed")
    stored = row("k-mkt")
    assert (stored.status, stored.code, stored.rule, stored.provider_calls) == ("refused", "unsubscribed", "consent", 0)
    receipt = send_message(
        key="k-receipt",
        content=email(contact.email),
        account_id=account.pk,
        contact_id=contact.pk,
        purpose=Purpose.TRANSACTIONAL,
    )
    assert isinstance(receipt, Sent)
    assert len(smtp.messages) == 1


def test_an_opted_out_phone_gets_no_sms_and_no_call_whatever_the_purpose(twilio_settings, fake_twilio, account):
    contact = ContactFactory(account=account, sms_opted_out=True)
    for key, content in (("k-sms", SmsText(contact.phone, "Hi")), ("k-call", VoiceCall(contact.phone, "Hello"))):
        outcome = send_message(
            key=key, content=content, account_id=account.pk, contact_id=contact.pk, purpose=Purpose.TRANSACTIONAL
        )
        assert isinstance(outcome, Refused)
        assert outcome.code == "sms_opted_out"
    assert fake_twilio.created == []


def test_no_address_is_refused_and_a_deleted_contact_too(smtp, account):
    contact = ContactFactory(account=account, email="")
    outcome = send_message(key="k-none", content=email(""), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Refused)
    assert (outcome.rule, outcome.code) == (Rule.ADDRESS, "no_address")
    gone = send_message(key="k-gone", content=email("a@example.com"), account_id=account.pk, contact_id=10**9)
    assert isinstance(gone, Refused)
    assert gone.code == "no_contact"
    assert smtp.messages == []


def test_a_test_send_bypasses_every_rule_and_is_still_in_the_ledger(smtp, account):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 1, "days": 1}])
    contact = ContactFactory(account=account, unsubscribed=True)
    outcome = send_message(
        key="test_1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk, purpose=Purpose.TEST
    )
    assert isinstance(outcome, Sent)
    assert row("test_1").purpose == "test"


# --- the SMS provider's idempotency header ------------------------------------------------------------------
def test_an_sms_carries_its_key_as_the_providers_idempotency_header(twilio_settings, fake_twilio, account):
    """The attempt that wrote the row died after the provider took the SMS: the retry sends it again with the
    same Idempotency-Key, and a provider that honours it answers with the first message, creating none."""
    contact = ContactFactory(account=account)
    key = "k-sms-crashed"
    Ledger().let_through(NewMessage(key, "sms", "marketing", contact.phone, account.pk, contact.pk))
    sms_channel().send_sms(to=contact.phone, body="Hi", idempotency_key=key)  # the dead attempt's call
    outcome = send_message(key=key, content=SmsText(contact.phone, "Hi"), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Sent)
    assert outcome.resent
    first, second = fake_twilio.requests
    assert first.header("Idempotency-Key") == second.header("Idempotency-Key") == key
    assert len(fake_twilio.created) == 1
    assert row(key).provider_message_id == fake_twilio.created[0] == outcome.result.message_id


# --- send windows ---------------------------------------------------------------------------------------------
def _closed_window_now() -> tuple[dict, datetime]:
    """An email window of one hour starting two hours from now (UTC), and when it opens next."""
    now = clock.now()
    opens = (now + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    span = f"{opens:%H}:00-{(opens + timedelta(hours=1)):%H}:00"
    if span.endswith("-00:00"):
        span = span.replace("-00:00", "-24:00")
    return {"days": ["mon-sun"], "hours": [span], "spread": 60}, opens


def test_outside_its_window_a_message_is_deferred_to_the_opening_and_recorded(smtp, account):
    window, opens = _closed_window_now()
    sending_settings_set(account_id=account.pk, send_windows={"email": window})
    contact = ContactFactory(account=account, time_zone="UTC")
    outcome = send_message(key="k-night", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Deferred)
    assert outcome.rule is Rule.SEND_WINDOW
    assert opens <= outcome.until < opens + timedelta(seconds=60)
    assert "send window" in outcome.reason
    stored = row("k-night")
    assert (stored.status, stored.deferred_until, stored.provider_calls) == ("deferred", outcome.until, 0)
    assert smtp.messages == []
    # The rules change (the window is lifted): the same key goes, on the same row.
    sending_settings_set(account_id=account.pk, send_windows={"email": None})
    sent = send_message(key="k-night", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(sent, Sent)
    assert sent.message_id == outcome.message_id
    assert [entry["status"] for entry in row("k-night").history] == ["deferred", "sending", "sent"]


def test_the_step_and_workflow_layers_decide_the_window(smtp, account):
    window, _ = _closed_window_now()
    contact = ContactFactory(account=account, time_zone="UTC")
    deferred = send_message(
        key="k-wf",
        content=email(contact.email),
        account_id=account.pk,
        contact_id=contact.pk,
        workflow_rules={"send_window": window},
    )
    assert isinstance(deferred, Deferred)


# --- frequency caps -------------------------------------------------------------------------------------------
def test_a_rolling_cap_defers_the_next_message_until_the_oldest_ages_out(smtp, account):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 2, "hours": 24}])
    contact = ContactFactory(account=account)

    def send(key: str):
        return send_message(key=key, content=email(contact.email), account_id=account.pk, contact_id=contact.pk)

    assert isinstance(send("k1"), Sent)
    age("k1", 10)
    assert isinstance(send("k2"), Sent)
    third = send("k3")
    assert isinstance(third, Deferred)
    assert third.rule is Rule.FREQUENCY_CAP
    under_again = row("k1").sending_at + timedelta(hours=24)
    assert under_again <= third.until <= under_again + timedelta(seconds=300)
    assert "2 marketing messages per 24 hours" in third.reason
    assert row("k3").status == "deferred"
    # Transactional messages are never capped (and not counted by this cap).
    receipt = send_message(
        key="k-receipt",
        content=email(contact.email),
        account_id=account.pk,
        contact_id=contact.pk,
        purpose=Purpose.TRANSACTIONAL,
    )
    assert isinstance(receipt, Sent)
    # Once the oldest has aged out, the deferred message goes (its own row, now sent).
    age("k1", 25)
    assert isinstance(send("k3"), Sent)
    assert len(smtp.messages) == 4


def test_a_calendar_day_cap_counts_from_the_contacts_midnight(smtp, account):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 1, "days": 1}])
    contact = ContactFactory(account=account, time_zone="Pacific/Kiritimati")  # UTC+14: far from UTC's midnight

    def send(key: str):
        return send_message(key=key, content=email(contact.email), account_id=account.pk, contact_id=contact.pk)

    assert isinstance(send("d1"), Sent)
    capped = send("d2")
    assert isinstance(capped, Deferred)
    from zoneinfo import ZoneInfo

    local = capped.until.astimezone(ZoneInfo("Pacific/Kiritimati"))
    assert local.hour == 0
    assert local.minute < 5


def test_a_channel_cap_counts_only_its_channel_and_include_transactional_counts_receipts(
    smtp, twilio_settings, fake_twilio, account
):
    sending_settings_set(
        account_id=account.pk,
        send_windows={"sms": None},
        frequency_caps=[{"max": 1, "hours": 24, "channel": "sms", "include_transactional": True}],
    )
    contact = ContactFactory(account=account)
    assert isinstance(
        send_message(key="e1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk),
        Sent,
    )
    receipt = send_message(
        key="s0",
        content=SmsText(contact.phone, "Your code"),
        account_id=account.pk,
        contact_id=contact.pk,
        purpose=Purpose.TRANSACTIONAL,
    )
    assert isinstance(receipt, Sent)  # never capped itself
    marketing = send_message(
        key="s1", content=SmsText(contact.phone, "Sale"), account_id=account.pk, contact_id=contact.pk
    )
    assert isinstance(marketing, Deferred)  # the receipt counted toward the SMS cap; the email did not


def test_when_capped_skip_refuses_the_message(smtp, account):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 1, "hours": 1}], when_capped="skip")
    contact = ContactFactory(account=account)
    assert isinstance(
        send_message(key="x1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk), Sent
    )
    skipped = send_message(key="x2", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(skipped, Refused)
    assert skipped.code == "over_cap"
    assert row("x2").status == "refused"


def test_a_message_that_has_gone_is_finished_not_judged_again(smtp, account):
    """Its row sending or sent, a retry does not ask the rules again: it was let through once."""
    contact = ContactFactory(account=account)
    assert isinstance(
        send_message(key="g1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk), Sent
    )
    contact.unsubscribed = True
    contact.save()
    again = send_message(key="g1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(again, Sent)
    assert again.already_sent


def test_the_ledger_indexes_serve_a_contacts_recent_messages_and_a_steps(account):
    if connection.vendor != "postgresql":
        pytest.skip("EXPLAIN's plan shape is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT count(*) FROM integrations_outbound_message WHERE contact_id = 1 AND sending_at > now()"
        )
        plan = "\n".join(line for (line,) in cursor.fetchall())
        assert "outbound_contact_recent" in plan, plan
        cursor.execute(
            "EXPLAIN SELECT * FROM integrations_outbound_message WHERE workflow_id = 1 AND step_key = 'welcome'"
        )
        plan = "\n".join(line for (line,) in cursor.fetchall())
        assert "outbound_step" in plan, plan
        cursor.execute("SET enable_seqscan = on")


def test_deferred_until_is_utc(smtp, account):
    window, _ = _closed_window_now()
    sending_settings_set(account_id=account.pk, send_windows={"email": window})
    contact = ContactFactory(account=account, time_zone="UTC")
    outcome = send_message(key="k-utc", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Deferred)
    assert outcome.until.utcoffset() == timedelta(0)
    assert outcome.seconds_after(datetime.now(UTC)) > 0


def test_a_capped_send_costs_one_ledger_statement_to_check_and_record_and_one_to_say_sent(smtp, account):
    """The measured budget: the cap check is the insert (no read-then-write of the ledger), and the whole
    door is a handful of indexed statements: the account's settings, the contact's locked row, the database's
    now (PostgreSQL), the ledger's insert-and-check, and its update once the provider accepted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 3, "days": 1}, {"max": 2, "hours": 1}])
    contact = ContactFactory(account=account, time_zone="Europe/Paris")
    with CaptureQueriesContext(connection) as queries:
        outcome = send_message(key="q1", content=email(contact.email), account_id=account.pk, contact_id=contact.pk)
    assert isinstance(outcome, Sent)
    statements = [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))
    ]
    ledger = [sql for sql in statements if "integrations_outbound_message" in sql]
    assert len(ledger) == 2, ledger
    assert ledger[0].startswith("INSERT")
    assert ledger[0].count("count(*)") == 2
    assert ledger[1].startswith("UPDATE")
    # The settings, the locked contact, [the database's now,] the insert-and-check, the update to sent.
    assert len(statements) == (5 if connection.vendor == "postgresql" else 4), statements
