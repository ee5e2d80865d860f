"""Enqueue's transaction rule with the queue apart, and the move of outbox rows to the queue.

The rule (README "Scaling out", docs/subsystems/queue-in-its-own-database.md):
- a caller with a transaction open on the queue's database: enqueue joins it (as with one database);
- else, a caller with a transaction open on another database: the job goes to that database's outbox, in
  that transaction, and is queued exactly when it commits (nothing on rollback), moved by a worker;
- else (no transaction anywhere): enqueue commits on the queue's database at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from uuid import UUID

from django.db import connections

from jobs.infrastructure.database import caller_databases, is_split, queue_database
from jobs.infrastructure.outbox import OutboxStore, insert_moved
from jobs.infrastructure.store import NewJob

log = logging.getLogger("relay.worker")

MOVE_BATCH = 500  # outbox rows moved per transaction


def outbox_for_caller() -> str | None:
    """The caller's database whose open transaction a job must join through its outbox, or None when the job
    can be written to the queue directly (the queue shares `default`, or the caller has a transaction open
    on the queue's database, or none at all)."""
    if not is_split() or connections[queue_database()].in_atomic_block:
        return None
    for alias in caller_databases():
        if connections[alias].in_atomic_block:
            return alias
    return None


def put(alias: str, jobs: Sequence[NewJob]) -> None:
    """Write jobs to `alias`'s outbox in the caller's transaction there."""
    OutboxStore(connections[alias]).put(jobs)


def waiting_in_outboxes(job_ids: Sequence[UUID]) -> set[UUID]:
    """Which of these jobs are committed but not moved to the queue yet (none with the queue in `default`)."""
    if not is_split() or not job_ids:
        return set()
    found: set[UUID] = set()
    for alias in caller_databases():
        found |= OutboxStore(connections[alias]).holding(job_ids)
    return found


def drop_from_outboxes(job_ids: Sequence[UUID]) -> None:
    """Forget jobs not moved yet (cancelled before they reached the queue), in the caller's transactions."""
    if not is_split() or not job_ids:
        return
    for alias in caller_databases():
        OutboxStore(connections[alias]).drop(job_ids)


def move_batch(source, queue, limit: int = MOVE_BATCH) -> int:
    """Move up to `limit` outbox rows from `source` (a private connection to a caller's database) to the queue
    (a private connection to the queue's database); returns how many rows were taken.

    Order of commits: the queue's insert first, then the outbox's delete. A mover that dies between them
    leaves the rows to be moved again, and the insert's ON CONFLICT DO NOTHING makes that a no-op.
    """
    with source.cursor() as cursor:
        cursor.execute("BEGIN")
        try:
            outbox = OutboxStore(source)
            rows = outbox.take(limit)
            if rows:
                insert_moved(queue, rows)  # commits on its own (autocommit)
                outbox.drop([row[0] for row in rows])
        except BaseException:
            try:
                cursor.execute("ROLLBACK")
            except Exception:
                source.close()
            raise
        cursor.execute("COMMIT")
    return len(rows)
