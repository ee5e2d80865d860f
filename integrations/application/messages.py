"""What the ledger says of a contact's messages, for the pages that show it (the contact's page: its deferred
sends). Reads only; the door alone writes the ledger (integrations.application.outbound)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from integrations.infrastructure.models import OutboundMessage


@dataclass(frozen=True)
class DeferredMessage:
    """A message the rules hold back: which channel, until when and why (the rule's own words), and where it
    came from (a run's step, or a job)."""

    channel: str
    until: datetime | None
    reason: str
    rule: str
    run_id: UUID | None
    step_key: str
    job_id: UUID | None


def deferred_messages(*, account_id: int, contact_id: int, limit: int = 20) -> list[DeferredMessage]:
    """The contact's messages waiting now (status deferred), soonest first: one indexed read (the ledger's
    `outbound_contact_recent` index leads with the contact)."""
    rows = (
        OutboundMessage.objects.filter(
            account_id=account_id, contact_id=contact_id, status=OutboundMessage.Status.DEFERRED
        )
        .order_by("deferred_until", "id")
        .values_list("channel", "deferred_until", "reason", "rule", "run_id", "step_key", "job_id")[:limit]
    )
    return [DeferredMessage(*row) for row in rows]
