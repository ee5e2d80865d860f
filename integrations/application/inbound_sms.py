"""Replies to Relay's SMS: STOP and START keywords change the number's consent.

Relay sends every account's SMS from one provider number, so a STOP from a
phone number is that person's answer to Relay as a whole: it opts out every
contact, in every account, whose phone is that number (the provider itself
blocks that sender-recipient pair from then on, so anything else would only
record a consent the provider no longer honours). START/UNSTOP reverses it.
Each change is recorded by `contact_set_consent` with source inbound_sms.

Any other message is a reply: it becomes an `sms.replied` event (data: the
`body` and the provider's `message` id) on every contact with that number,
once per provider message id (the provider retrying its webhook is not a
second reply). Workflows may wait for it, branch on it, or start on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from contacts.application.events import SMS_REPLIED, dedup_key, record_contact_event
from contacts.application.services import contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource
from contacts.models import Contact
from integrations.domain.sms import SmsConsentCommand, consent_keyword, mask_phone, normalize_phone
from integrations.infrastructure.models import InboundSmsMessage

log = logging.getLogger("relay.integrations.sms")


@dataclass(frozen=True)
class InboundSmsOutcome:
    command: SmsConsentCommand | None  # None: an ordinary reply or a message received before, nothing to do
    matched: int = 0  # contacts with that phone number
    changed: int = 0  # contacts whose consent changed (the rest already agreed)
    replies: int = 0  # sms.replied events recorded (an ordinary reply, first delivery)


@transaction.atomic
def inbound_sms_receive(*, from_number: str, body: str, message_sid: str = "") -> InboundSmsOutcome:
    match = consent_keyword(body)
    number = normalize_phone(from_number)
    if not number:
        return InboundSmsOutcome(command=None)
    spellings = {number, number.lstrip("+")}
    if match is None:
        return _reply(number, spellings, body, message_sid)
    command, keyword = match
    if message_sid and not _first_delivery(message_sid):
        log.info("inbound sms %s from %s: message already received, ignored", keyword, mask_phone(number))
        return InboundSmsOutcome(command=None)
    contact_ids = list(Contact.objects.filter(phone__in=spellings).order_by("pk").values_list("pk", flat=True))
    changed = 0
    detail = f"keyword {keyword}" + (f", message {message_sid[:64]}" if message_sid else "")
    for contact_id in contact_ids:
        _, did_change = contact_set_consent(
            contact_id=contact_id,
            channel=ConsentChannel.SMS,
            opted_out=command is SmsConsentCommand.OPT_OUT,
            source=ConsentSource.INBOUND_SMS,
            detail=detail,
        )
        changed += did_change
    log.info(
        "inbound sms %s from %s: %d contacts matched, %d changed",
        keyword,
        mask_phone(number),
        len(contact_ids),
        changed,
    )
    return InboundSmsOutcome(command=command, matched=len(contact_ids), changed=changed)


MAX_REPLY_CHARS = 1600


def _reply(number: str, spellings: set[str], body: str, message_sid: str) -> InboundSmsOutcome:
    """An ordinary reply: `sms.replied` on each contact with that number, once per provider message id."""
    contacts = list(Contact.objects.filter(phone__in=spellings).order_by("pk").values_list("pk", "account_id"))
    text = (body or "")[:MAX_REPLY_CHARS]
    recorded = 0
    for contact_id, account_id in contacts:
        event = record_contact_event(
            account_id=account_id,
            contact_id=contact_id,
            name=SMS_REPLIED,
            data={"body": text, "message": message_sid[:64]},
            dedup=dedup_key("sms", message_sid) if message_sid else "",
        )
        recorded += event is not None
    log.info("inbound sms reply from %s: %d contacts, %d events recorded", mask_phone(number), len(contacts), recorded)
    return InboundSmsOutcome(command=None, matched=len(contacts), replies=recorded)


def _first_delivery(message_sid: str) -> bool:
    """Whether this is the first time the provider's message id arrives (see InboundSmsMessage)."""
    _, created = InboundSmsMessage.objects.get_or_create(message_sid=message_sid[:64])
    return created


def forget_inbound_messages(*, before: datetime) -> int:
    """Drop the ids of keyword messages received before `before`; returns how many."""
    deleted, _ = InboundSmsMessage.objects.filter(received_at__lt=before).delete()
    return deleted
