"""The door: every email, SMS and call Relay sends goes through `send_message`, and nothing else calls the channel
adapters (`integrations.application.channels`' email_channel, sms_channel and voice_channel; a unit test holds
that). A workflow step, the built-in `send_email` job and the builder's "send a test" all come here.

    outcome = send_message(
        key=f"job_{job.id}",                     # the same on every attempt of this message (its idempotency key)
        content=EmailMessage(to=..., subject=..., text=...),   # or SmsText(to, body), VoiceCall(to, message)
        account_id=account.pk, contact_id=contact.pk,          # no contact: a bare address, no consent to check
        purpose=None,                            # Purpose.TEST for a test send; else the step's, workflow's, marketing
        workflow_rules=workflow.sending_rules, step_rules=config.sending,   # the layers of the sending rules
        origin=Origin(workflow_id=..., run_id=..., step_key=..., job_id=...),
    )
    # Sent(result) | Deferred(until, reason, rule) | Refused(reason, rule, code)

Per message: the rules in force (`effective_rules`), then, in one short transaction, the contact's row read under
its lock (`FOR NO KEY UPDATE`: fresh consent and address, and the lock that makes the caps exact), `decide`
(consent, address, suppression, the send window), and the ledger row written (status `sending`) by the one
statement that also checks every frequency cap; committed BEFORE the provider is called. The call carries the
key (the email's Message-ID, an SMS provider's Idempotency-Key). A retry of the same message finds its row: a
`sent` one is never sent again; a `sending` one (the attempt that wrote it died before it knew the outcome) is
sent again with the same key, which is all SMTP and Twilio let us do (the residual window:
docs/decisions/the-door-and-the-ledger.md). A message that has gone is finished, not judged again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction

from accounts.application.selectors import account_time_zone
from contacts.application.clock import contact_clock
from contacts.application.selectors import contact_locked_for_sending
from contacts.domain.clock import ClockSource
from contacts.domain.model import ConsentState
from integrations.application import channels
from integrations.application.sending_rules import effective_rules
from integrations.domain.channels import DeliveryResult, EmailMessage, OnAccepted
from integrations.domain.sending import (
    AccountSendingSettings,
    Channel,
    Defer,
    FrequencyCap,
    Outbound,
    Purpose,
    Refuse,
    Rule,
    Send,
    SendingRules,
    SentMessage,
    StepSendingRules,
    Verdict,
    decide,
    resolve,
)
from integrations.domain.sms import mask_email, mask_phone
from integrations.infrastructure.ledger import COUNTED, CapCount, Ledger, LedgerRow, NewMessage, Status
from kernel import clock
from kernel.failures import format_error

log = logging.getLogger("relay.integrations.outbound")


@dataclass(frozen=True)
class SmsText:
    to: str
    body: str


@dataclass(frozen=True)
class VoiceCall:
    to: str
    message: str | None = None
    recording_url: str | None = None


Content = EmailMessage | SmsText | VoiceCall


@dataclass(frozen=True)
class Origin:
    """Where a message came from, kept on its ledger row (what reports and "this step's messages" read)."""

    workflow_id: int | None = None
    version_id: UUID | None = None
    run_id: UUID | None = None
    step_key: str = ""
    split_path: str = ""
    job_id: UUID | None = None


@dataclass(frozen=True)
class Sent:
    """The provider accepted it (now, or on an earlier attempt: `already_sent`, and it was not sent again)."""

    result: DeliveryResult
    message_id: int | None = None  # the ledger row
    already_sent: bool = False
    resent: bool = False  # sent again with the same key: the earlier attempt's outcome was unknown


@dataclass(frozen=True)
class Deferred:
    """Not now: ask again at `until` (UTC, the database's clock). Not an attempt and not a failure."""

    until: datetime
    reason: str
    rule: Rule
    message_id: int | None = None

    def seconds_after(self, now: datetime) -> float:
        return max(0.0, (self.until - now).total_seconds())


@dataclass(frozen=True)
class Refused:
    """Never, for this message: the step is skipped, the job completes as skipped, with `reason` and `code`."""

    reason: str
    rule: Rule
    code: str
    message_id: int | None = None


Outcome = Sent | Deferred | Refused

RESENT = "resent with the same key: the attempt that wrote this row ended before it knew whether the provider took it"
_CHANNELS: dict[type, Channel] = {EmailMessage: Channel.EMAIL, SmsText: Channel.SMS, VoiceCall: Channel.VOICE}


def send_message(
    *,
    key: str,
    content: Content,
    account_id: int | None = None,
    contact_id: int | None = None,
    purpose: Purpose | None = None,
    workflow_rules: Mapping[str, Any] | None = None,
    step_rules: StepSendingRules | None = None,
    origin: Origin = Origin(),
) -> Outcome:
    """Send one message through its channel once the rules let it, recorded in the ledger before it leaves.

    Raises the channel's classified error (kernel.failures) when the provider call fails; the row is then
    `failed` and the caller's retry (the same key) tries again. `key` must be the same on every attempt of
    this message and differ between messages."""
    channel = _CHANNELS[type(content)]
    chosen, rules = _rules(account_id, channel, workflow_rules, step_rules, purpose)
    record = NewMessage(
        key=key,
        channel=channel.value,
        purpose=chosen.value,
        address=content.to,
        account_id=account_id,
        contact_id=contact_id,
        workflow_id=origin.workflow_id,
        version_id=origin.version_id,
        run_id=origin.run_id,
        step_key=origin.step_key,
        split_path=origin.split_path,
        job_id=origin.job_id,
    )
    ledger = Ledger()
    let_through: int | None = None
    found: LedgerRow | None = None
    verdict: Verdict
    with transaction.atomic():
        consent: ConsentState | None = None
        zone = "UTC"
        if contact_id is not None:
            # Locked until the commit: the lock that makes the ledger's cap check exact; consent read as it is now.
            row = contact_locked_for_sending(account_id=account_id, contact_id=contact_id)
            if row is None:
                return Refused("the contact no longer exists", Rule.ADDRESS, "no_contact")
            consent = ConsentState(unsubscribed=row["unsubscribed"], sms_opted_out=row["sms_opted_out"])
            if _reads_clock(chosen, rules):
                zone = _contact_zone(row, account_id)
        elif account_id is not None and _reads_clock(chosen, rules):
            zone = account_time_zone(account_id)
        now = clock.now()
        message = Outbound(channel, chosen, key, content.to or "", consent=consent, time_zone=zone)
        verdict = decide(message, rules, now=now, suppressed=_suppressed(account_id, content.to))
        if isinstance(verdict, Send):
            caps = _cap_counts(message, rules, now) if contact_id is not None else []
            let_through = ledger.let_through(record, caps)
            if let_through is None:
                found = ledger.find(key)
                if found is None or found.status not in COUNTED:  # a cap is full: until when, the rule says
                    found = None
                    verdict = _over_cap(message, rules, now, ledger, contact_id)
        if not isinstance(verdict, Send):
            held = ledger.hold(
                record,
                status=Status.DEFERRED if isinstance(verdict, Defer) else Status.REFUSED,
                rule=verdict.rule.value,
                code=verdict.code if isinstance(verdict, Refuse) else "",
                reason=verdict.reason,
                until=verdict.until if isinstance(verdict, Defer) else None,
            )
            if held is None:  # its row has gone (sending or sent): a message let through is finished, not re-judged
                found = ledger.find(key)
            elif isinstance(verdict, Defer):
                _log_not_sent(key, channel, content.to, f"deferred until {verdict.until:%Y-%m-%d %H:%M:%S}Z")
                return Deferred(verdict.until, verdict.reason, verdict.rule, held)
            else:
                assert isinstance(verdict, Refuse)
                _log_not_sent(key, channel, content.to, f"refused ({verdict.code})")
                return Refused(verdict.reason, verdict.rule, verdict.code, held)
    if let_through is not None:
        return _deliver(ledger, let_through, key, content, account_id, contact_id, resent=False)
    assert found is not None
    if found.status == Status.SENT:
        log.info("%s %s was sent before: not sent again", channel, key)
        return Sent(_stored_result(channel, found), found.id, already_sent=True)
    if not ledger.begin_resend(found.id, detail=RESENT):
        again = ledger.find(key)  # another attempt finished it meanwhile
        if again is not None and again.status == Status.SENT:
            return Sent(_stored_result(channel, again), again.id, already_sent=True)
    log.warning("%s %s: the earlier attempt's outcome is unknown; sent again with the same key", channel, key)
    return _deliver(ledger, found.id, key, content, account_id, contact_id, resent=True)


def _rules(
    account_id: int | None,
    channel: Channel,
    workflow_rules: Mapping[str, Any] | None,
    step_rules: StepSendingRules | None,
    purpose: Purpose | None,
) -> tuple[Purpose, SendingRules]:
    if account_id is None:  # an operator's message of no account: the built-in defaults
        return resolve(account=AccountSendingSettings(), channel=channel, step=step_rules, purpose=purpose)
    return effective_rules(
        account_id=account_id, channel=channel, workflow_rules=workflow_rules, step=step_rules, purpose=purpose
    )


def _reads_clock(purpose: Purpose, rules: SendingRules) -> bool:
    """Only a window or a cap reads the contact's clock: without them no zone is looked up."""
    return rules.window_for(purpose) is not None or (purpose is Purpose.MARKETING and bool(rules.caps))


def _contact_zone(row: Mapping[str, Any], account_id: int | None) -> str:
    own_or_phone = contact_clock(row, account_time_zone="")
    if own_or_phone.source is not ClockSource.ACCOUNT:
        return own_or_phone.time_zone
    return account_time_zone(int(account_id if account_id is not None else row["account_id"]))


def _suppressed(account_id: int | None, address: str) -> frozenset[str]:
    """The suppression list's entries for this address: none yet (the deliverability work fills the list)."""
    return frozenset()


def _applying(message: Outbound, rules: SendingRules) -> list[FrequencyCap]:
    if message.purpose is not Purpose.MARKETING:
        return []
    return [cap for cap in rules.caps if cap.applies_to(message)]


def _cap_counts(message: Outbound, rules: SendingRules, now: datetime) -> list[CapCount]:
    """Each cap that applies to the message, as the ledger's statement counts it (the pure rule's bounds)."""
    zone = message.zone
    return [
        CapCount(
            limit=cap.limit,
            since=cap.since(now, zone),
            inclusive=cap.hours is None,  # calendar days count from a midnight, rolling hours after `now - hours`
            purposes=(Purpose.MARKETING.value, Purpose.TRANSACTIONAL.value)
            if cap.include_transactional
            else (Purpose.MARKETING.value,),
            channel=cap.channel.value if cap.channel is not None else None,
        )
        for cap in _applying(message, rules)
    ]


def _over_cap(message: Outbound, rules: SendingRules, now: datetime, ledger: Ledger, contact_id: int | None) -> Verdict:
    """The statement found a cap full: the pure rule, given the rows it counted, says until when (or skip)."""
    since = rules.lookback(message, now)
    rows = ledger.counted_since(contact_id, since) if since is not None and contact_id is not None else []
    sent = [SentMessage(at, Channel(channel), Purpose(purpose)) for at, channel, purpose in rows]
    verdict = decide(message, rules, now=now, sent=sent)
    if isinstance(verdict, Send):  # the statement and the rule count the same rows under one lock: never here
        log.error("message %s: the ledger found a cap full that the rule does not; deferred a minute", message.key)
        return Defer(now + timedelta(minutes=1), "over a frequency cap", Rule.FREQUENCY_CAP)
    return verdict


def _deliver(
    ledger: Ledger,
    row_id: int,
    key: str,
    content: Content,
    account_id: int | None,
    contact_id: int | None,
    *,
    resent: bool,
) -> Sent:
    """The provider call, after the row is committed; the row says sent the moment the provider accepted it
    (for email, before the SMTP session's QUIT), or failed."""
    accepted: list[DeliveryResult] = []

    def on_accepted(result: DeliveryResult) -> None:
        accepted.append(result)  # first: if recording it fails, the row stays sending (resent), never failed
        ledger.mark_sent(row_id, provider=result.provider, provider_message_id=result.message_id or "")

    try:
        result = _call(content, key, account_id, contact_id, on_accepted)
    except Exception as exc:
        if not accepted:
            try:
                ledger.mark_failed(row_id, error=format_error(exc))
            except Exception as unrecorded:  # the row stays sending: a retry resends with the same key
                log.warning("message %s: its failure could not be recorded (%s)", key, format_error(unrecorded))
        raise
    if not accepted:
        on_accepted(result)
    return Sent(result, row_id, resent=resent)


def _call(
    content: Content, key: str, account_id: int | None, contact_id: int | None, on_accepted: OnAccepted
) -> DeliveryResult:
    """The one place the channel adapters are called."""
    if isinstance(content, EmailMessage):
        email = replace(content, account_id=account_id, contact_id=contact_id, idempotency_key=key)
        return channels.email_channel().send_email(email, on_accepted=on_accepted)
    if isinstance(content, SmsText):
        return channels.sms_channel().send_sms(
            to=content.to,
            body=content.body,
            account_id=account_id,
            contact_id=contact_id,
            idempotency_key=key,
            on_accepted=on_accepted,
        )
    return channels.voice_channel().place_call(
        to=content.to,
        message=content.message,
        recording_url=content.recording_url,
        account_id=account_id,
        idempotency_key=key,
        on_accepted=on_accepted,
    )


def _stored_result(channel: Channel, row: LedgerRow) -> DeliveryResult:
    """What a step keeps of a message sent on an earlier attempt: the ledger's record of it."""
    return DeliveryResult(
        channel=channel.value,
        provider=row.provider,
        message_id=row.provider_message_id or None,
        status="sent",
        details={"already_sent": True},
    )


def _log_not_sent(key: str, channel: Channel, address: str, what: str) -> None:
    masked = mask_email(address) if channel is Channel.EMAIL else mask_phone(address)
    log.info("%s %s to %s %s", channel, key, masked, what)
