"""The event-wait store: runs WAITING in a `wait_for_event` step, found by (account, contact, event).

The lookup an event makes is one indexed statement (`event_wait_lookup`, a
partial index on the waits no event has reached yet), plain SQL because it
runs for every event, on the path of every tag and update step. The rest
(beginning, recording the event, resolving) is the ORM: once per wait.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection

from workflows.domain.waits import RecordedEvent
from workflows.infrastructure.models import EventWait


@dataclass(frozen=True)
class Waiting:
    """A wait an event may satisfy."""

    execution_id: UUID
    match: dict[str, Any]
    timeout_at: datetime


@dataclass(frozen=True)
class WaitRow:
    execution_id: UUID
    step_key: str
    timeout_at: datetime
    recorded: RecordedEvent | None


_LOOKUP = (
    "SELECT execution_id, match, timeout_at FROM workflows_eventwait"
    " WHERE account_id = %s AND contact_id = %s AND event = %s AND event_id = ''"
)


class WaitStore:
    def waiting_for(self, account_id: int, contact_id: int, event: str) -> list[Waiting]:
        """The waits on this event of this contact that no event reached yet (by the partial index)."""
        if connection.vendor != "postgresql":  # SQLite, the laptop default: the ORM converts its text columns
            rows = EventWait.objects.filter(
                account_id=account_id, contact_id=contact_id, event=event, event_id=""
            ).values_list("execution_id", "match", "timeout_at")
            return [Waiting(execution_id, dict(match or {}), at) for execution_id, match, at in rows]
        with connection.cursor() as cursor:
            cursor.execute(_LOOKUP, [account_id, contact_id, event])
            rows = cursor.fetchall()
        # Django has psycopg hand jsonb back as text (JSONField parses it); uuid and timestamptz are decoded.
        return [
            Waiting(execution_id, json.loads(match) if isinstance(match, str | bytes) else dict(match or {}), at)
            for execution_id, match, at in rows
        ]

    def begin(
        self,
        *,
        execution_id: UUID,
        account_id: int,
        contact_id: int,
        event: str,
        match: dict[str, Any],
        step_key: str,
        timeout_at: datetime,
    ) -> None:
        """The run now waits (a wait left from an earlier visit of a step, if any, is replaced)."""
        EventWait.objects.filter(execution_id=execution_id).delete()
        EventWait.objects.create(
            execution_id=execution_id,
            account_id=account_id,
            contact_id=contact_id,
            event=event,
            match=match,
            step_key=step_key,
            timeout_at=timeout_at,
        )

    def record_event(self, execution_id: UUID, *, event_id: str, at: datetime, data: dict[str, Any]) -> bool:
        """Record the event on the wait, if none is recorded yet and it came before the timeout: True if it won.

        One UPDATE on the row: it waits for (and then re-reads) a resolver holding the row, so of an event and
        the timeout exactly one wins.
        """
        changed = EventWait.objects.filter(execution_id=execution_id, event_id="", timeout_at__gt=at).update(
            event_id=event_id, event_at=at, event_data=data
        )
        return changed == 1

    def lock(self, execution_id: UUID) -> WaitRow | None:
        """The run's wait, locked until the caller's transaction ends (the resolver's side of the race)."""
        row = EventWait.objects.select_for_update().filter(execution_id=execution_id).first()
        return _row(row)

    def read(self, execution_id: UUID) -> WaitRow | None:
        return _row(EventWait.objects.filter(execution_id=execution_id).first())

    def forget(self, execution_id: UUID) -> None:
        """The wait is over (resolved, or the run ended another way): its row leaves the index."""
        EventWait.objects.filter(execution_id=execution_id).delete()

    def count(self) -> int:
        return EventWait.objects.count()


def _row(row: EventWait | None) -> WaitRow | None:
    if row is None:
        return None
    recorded = None
    if row.event_id and row.event_at is not None:
        recorded = RecordedEvent(id=row.event_id, at=row.event_at, data=dict(row.event_data or {}))
    return WaitRow(row.execution_id, row.step_key, row.timeout_at, recorded)
