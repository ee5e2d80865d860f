"""SMS conversations: which contact Relay last texted from a number, so a reply to that number finds its contact.

Written after a provider accepted an SMS for a contact (the send step runs outside any transaction); read
when a reply arrives (`inbound_sms`). Keeping it must never fail a send that already happened: a failed
write is logged and the SMS stays sent (a retry would text the person twice).
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from django.db import DatabaseError, transaction
from django.utils import timezone

from integrations.domain.channels import SentSms
from integrations.domain.sms import ReplyCandidate
from integrations.infrastructure.models import SmsConversation
from integrations.infrastructure.queries import contacts_with_last_text

log = logging.getLogger("relay.integrations.sms")


def record_sms_sent(sent: SentSms) -> None:
    """The contact's conversation with `sent.from_number` now ends with this SMS (one upsert)."""
    if not sent.from_number:
        return
    row = SmsConversation(
        account_id=sent.account_id,
        contact_id=sent.contact_id,
        from_number=sent.from_number,
        to_number=sent.to,
        last_sent_at=timezone.now(),
        last_message_id=(sent.message_id or "")[:64],
    )
    try:
        with transaction.atomic():  # a savepoint inside a caller's transaction, its own one outside
            SmsConversation.objects.bulk_create(
                [row],
                update_conflicts=True,
                unique_fields=["contact", "from_number"],
                update_fields=["account", "to_number", "last_sent_at", "last_message_id"],
            )
    except DatabaseError as exc:  # the contact deleted meanwhile, the database away: the SMS is sent all the same
        log.warning("sms %s sent, its conversation not kept: %s", sent.message_id, type(exc).__name__)


def reply_candidates(*, phones: Collection[str], receiving_number: str) -> list[ReplyCandidate]:
    """Every contact whose phone is one of `phones`, with when Relay last texted it from `receiving_number`
    (to that phone: a conversation with a number the contact no longer has does not count)."""
    rows = contacts_with_last_text(phones=phones, from_number=receiving_number)
    return [
        ReplyCandidate(contact_id=pk, account_id=account_id, updated_at=updated_at, texted_at=texted_at)
        for pk, account_id, updated_at, texted_at in rows
    ]
