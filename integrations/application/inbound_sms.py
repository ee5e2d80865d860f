"""Replies to Relay's SMS: STOP and START keywords change the number's consent; anything else is a reply.

Relay sends every account's SMS from one provider number, so a STOP from a
phone number is that person's answer to Relay as a whole: it opts out every
contact, in every account, whose phone is that number (the provider itself
blocks that sender-recipient pair from then on, so anything else would only
record a consent the provider no longer honours, and a STOP means that phone
must not be texted). START/UNSTOP reverses only what a keyword did: a
contact whose SMS opt-out was recorded another way (the API, the admin, a
workflow: the person told the account) stays opted out, since a text to a
shared number is no new consent for that account. Each change is recorded
by `contact_set_consent` with source inbound_sms.

Any other message is a reply: an `sms.replied` event (data: the `body` and
the provider's `message` id) on ONE contact (`reply_recipient`): the one Relay
last texted from the number the reply was sent to (`To`: the conversation it
answers), else the most recently updated contact with that phone when they
are all in one account; never on contacts of other accounts. Once per
provider message id (the provider retrying its webhook is not a second
reply). Workflows may wait for it, branch on it, or start on it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from contacts.application.events import SMS_REPLIED, dedup_key, record_contact_event
from contacts.application.selectors import contact_ids_by_phone, sms_opted_out_by_keyword
from contacts.application.services import contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource
from integrations.application.conversations import reply_candidates
from integrations.domain.sms import SmsConsentCommand, consent_keyword, mask_phone, normalize_phone, reply_recipient
from integrations.infrastructure.models import InboundSmsMessage

log = logging.getLogger("relay.integrations.sms")


@dataclass(frozen=True)
class InboundSmsOutcome:
    command: SmsConsentCommand | None  # None: an ordinary reply or a message received before, nothing to do
    matched: int = 0  # contacts with that phone number
    changed: int = 0  # contacts whose consent changed (the rest already agreed)
    replies: int = 0  # sms.replied events recorded (an ordinary reply, first delivery)


@transaction.atomic
def inbound_sms_receive(
    *, from_number: str, body: str, message_sid: str = "", to_number: str = ""
) -> InboundSmsOutcome:
    """`to_number`: the number the person wrote to (the provider's `To`), which says whose conversation a
    reply continues."""
    match = consent_keyword(body)
    number = normalize_phone(from_number)
    if not number:
        return InboundSmsOutcome(command=None)
    spellings = {number, number.lstrip("+")}
    if match is None:
        return _reply(number, spellings, normalize_phone(to_number), body, message_sid)
    command, keyword = match
    if message_sid and not _first_delivery(message_sid):
        log.info("inbound sms %s from %s: message already received, ignored", keyword, mask_phone(number))
        return InboundSmsOutcome(command=None)
    contact_ids = contact_ids_by_phone(phones=spellings)
    kept = 0
    if command is SmsConsentCommand.OPT_IN:  # only what a keyword opted out, a keyword opts back in
        by_keyword = sms_opted_out_by_keyword(contact_ids=contact_ids)
        kept = sum(1 for pk in contact_ids if pk not in by_keyword)
        contact_ids = [pk for pk in contact_ids if pk in by_keyword]
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
        "inbound sms %s from %s: %d contacts matched, %d changed, %d opted out another way kept",
        keyword,
        mask_phone(number),
        len(contact_ids) + kept,
        changed,
        kept,
    )
    return InboundSmsOutcome(command=command, matched=len(contact_ids) + kept, changed=changed)


MAX_REPLY_CHARS = 1600


def _reply(number: str, spellings: set[str], to_number: str, body: str, message_sid: str) -> InboundSmsOutcome:
    """An ordinary reply: `sms.replied` on the one contact it answers, once per provider message id.

    The id is kept as a keyword's is (`InboundSmsMessage`): the contact a retried delivery would be given
    can differ from the first one's (a contact updated meanwhile), and the reply must still count once."""
    if message_sid and not _first_delivery(message_sid):
        log.info("inbound sms reply from %s: message already received, ignored", mask_phone(number))
        return InboundSmsOutcome(command=None)
    candidates = reply_candidates(phones=spellings, receiving_number=to_number)
    recipient = reply_recipient(candidates)
    recorded = 0
    if recipient is not None:
        event = record_contact_event(
            account_id=recipient.account_id,
            contact_id=recipient.contact_id,
            name=SMS_REPLIED,
            data={"body": (body or "")[:MAX_REPLY_CHARS], "message": message_sid[:64]},
            dedup=dedup_key("sms", message_sid) if message_sid else "",
        )
        recorded = int(event is not None)
    log.info(
        "inbound sms reply from %s: %d contacts with that phone in %d accounts, %s, %d events recorded",
        mask_phone(number),
        len(candidates),
        len({c.account_id for c in candidates}),
        "no account can be told (no conversation)" if recipient is None and candidates else "attributed",
        recorded,
    )
    return InboundSmsOutcome(command=None, matched=len(candidates), replies=recorded)


def _first_delivery(message_sid: str) -> bool:
    """Whether this is the first time the provider's message id arrives (see InboundSmsMessage)."""
    _, created = InboundSmsMessage.objects.get_or_create(message_sid=message_sid[:64])
    return created


def forget_inbound_messages(*, before: datetime) -> int:
    """Drop the ids of keyword messages received before `before`; returns how many."""
    deleted, _ = InboundSmsMessage.objects.filter(received_at__lt=before).delete()
    return deleted
