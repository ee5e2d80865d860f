"""The queue's public Python API: what other apps call to put work on it.

Enqueue joins the caller's transaction: the job exists if and only if that
transaction commits, and on PostgreSQL idle workers are woken exactly then
(NOTIFY is delivered at commit). With the queue in its own database
(JOBS_DATABASE) a transaction open on another database is joined through that
database's outbox (jobs.application.outbox: the rule).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from jobs.application.outbox import outbox_for_caller, put
from jobs.application.registry import get_handler, get_payload_check
from jobs.domain.ids import uuid7
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job
from jobs.infrastructure.store import NewJob, get_store

DEFAULT_QUEUE = "default"
MAX_PAYLOAD_BYTES = 1_000_000
PRIORITY_RANGE = (-32768, 32767)


class InvalidJob(ValueError):
    """A job that cannot be queued; `field` names what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class JobSpec:
    """One job to queue, for enqueue_many."""

    handler: str
    payload: dict[str, Any] = field(default_factory=dict)
    queue: str = DEFAULT_QUEUE
    priority: int = 0
    run_at: datetime | None = None
    account: Any = None  # an Account or its id
    unique_key: str | None = None
    max_attempts: int | None = None
    created_by: Any = None  # a user or its id
    expires_at: datetime | None = None  # the deadline to start by; past it the job is dead-lettered as expired
    expires_in: timedelta | float | None = None  # the same, as seconds from the enqueue (the database's clock)


def enqueue(
    handler: str,
    payload: dict[str, Any] | None = None,
    *,
    queue: str = DEFAULT_QUEUE,
    priority: int = 0,
    run_at: datetime | None = None,
    account: Any = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
    created_by: Any = None,
    expires_at: datetime | None = None,
    expires_in: timedelta | float | None = None,
    using: str | None = None,
) -> Job:
    """Queue one job and return it; with a `unique_key` an unfinished job already holds, return that job.

    `expires_at` (or `expires_in`, seconds or a timedelta from now) is a deadline: a job not started by then
    is dead-lettered with the reason "expired" and never runs.
    """
    spec = JobSpec(
        handler=handler,
        payload=payload if payload is not None else {},
        queue=queue,
        priority=priority,
        run_at=run_at,
        account=account,
        unique_key=unique_key,
        max_attempts=max_attempts,
        created_by=created_by,
        expires_at=expires_at,
        expires_in=expires_in,
    )
    new = prepare_job(spec)
    outbox = None if using is not None else outbox_for_caller()
    using = using or queue_database()
    if outbox is not None:  # the caller's transaction is on another database: queued when it commits
        put(outbox, [new])
        return _unsaved_view(new, using)
    holder = get_store(using).insert([new])[new.id]
    if holder != new.id:
        return Job.objects.using(using).get(pk=holder)
    return _unsaved_view(new, using)


def enqueue_many(specs: Iterable[JobSpec], *, using: str | None = None, chunk_size: int = 5000) -> list[UUID]:
    """Queue many jobs in few statements; returns each job's id in order (the holder's id for a taken key)."""
    rows = [prepare_job(spec) for spec in specs]
    outbox = None if using is not None else outbox_for_caller()
    if outbox is not None:
        for start in range(0, len(rows), chunk_size):
            put(outbox, rows[start : start + chunk_size])
        return [row.id for row in rows]
    store = get_store(using or queue_database())
    ids: list[UUID] = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start : start + chunk_size]
        holders = store.insert(chunk)
        ids.extend(holders[row.id] for row in chunk)
    return ids


def prepare_job(spec: JobSpec) -> NewJob:
    """Check a job and turn it into the row to insert (InvalidJob / UnknownHandler name what is wrong)."""
    get_handler(spec.handler)  # unknown names are refused here, not discovered by a worker
    if not isinstance(spec.payload, dict):
        raise InvalidJob("payload", "must be a JSON object (a dict)")
    try:
        payload = json.dumps(spec.payload, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJob("payload", f"must be JSON-serializable ({exc})") from None
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise InvalidJob("payload", f"must be at most {MAX_PAYLOAD_BYTES} bytes as JSON")
    check = get_payload_check(spec.handler)
    if check is not None:
        problems = check(spec.payload)
        if problems:
            key, reason = sorted(problems.items())[0]
            raise InvalidJob(f"payload.{key}", reason)
    if not isinstance(spec.queue, str) or not 0 < len(spec.queue) <= 100:
        raise InvalidJob("queue", "must be a name of 1 to 100 characters")
    if isinstance(spec.priority, bool) or not isinstance(spec.priority, int):
        raise InvalidJob("priority", "must be an integer")
    if not PRIORITY_RANGE[0] <= spec.priority <= PRIORITY_RANGE[1]:
        raise InvalidJob("priority", f"must be between {PRIORITY_RANGE[0]} and {PRIORITY_RANGE[1]}")
    if spec.run_at is not None and (not isinstance(spec.run_at, datetime) or timezone.is_naive(spec.run_at)):
        raise InvalidJob("run_at", "must be a timezone-aware datetime")
    max_attempts = spec.max_attempts if spec.max_attempts is not None else settings.JOB_MAX_RETRIES + 1
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidJob("max_attempts", "must be a whole number of at least 1")
    if spec.unique_key is not None and (not isinstance(spec.unique_key, str) or not 0 < len(spec.unique_key) <= 200):
        raise InvalidJob("unique_key", "must be a string of 1 to 200 characters")
    expires_at, expires_in = _deadline(spec)
    return NewJob(
        id=uuid7(),
        queue=spec.queue,
        handler=spec.handler,
        payload=payload,
        priority=spec.priority,
        run_at=spec.run_at,
        max_attempts=max_attempts,
        account_id=_pk(spec.account),
        created_by_id=_pk(spec.created_by),
        unique_key=spec.unique_key,
        expires_at=expires_at,
        expires_in=expires_in,
    )


def _deadline(spec: JobSpec) -> tuple[datetime | None, float | None]:
    """The job's deadline as (expires_at, expires_in seconds), checked; at most one of them is set.

    A deadline already past, or not after the job's own due time, could only dead-letter the job: refused.
    expires_in stays relative so the database's clock turns it into a time, as it does for run_at.
    """
    if spec.expires_at is not None and spec.expires_in is not None:
        raise InvalidJob("expires_in", "give expires_at or expires_in, not both")
    if spec.expires_at is not None:
        if not isinstance(spec.expires_at, datetime) or timezone.is_naive(spec.expires_at):
            raise InvalidJob("expires_at", "must be a timezone-aware datetime")
        if spec.expires_at <= timezone.now():
            raise InvalidJob("expires_at", "is in the past: a job must be able to start before its deadline")
        if spec.run_at is not None and spec.expires_at <= spec.run_at:
            raise InvalidJob("expires_at", "must be after run_at: the job could never start")
        return spec.expires_at, None
    if spec.expires_in is not None:
        seconds = spec.expires_in.total_seconds() if isinstance(spec.expires_in, timedelta) else spec.expires_in
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds:
            raise InvalidJob("expires_in", "must be a number of seconds or a timedelta")
        if seconds <= 0:
            raise InvalidJob(
                "expires_in", "must be more than 0 seconds: a job must be able to start before its deadline"
            )
        if seconds > 3650 * 86400:
            raise InvalidJob("expires_in", "must be at most 3650 days")
        if spec.run_at is not None and spec.run_at >= timezone.now() + timedelta(seconds=seconds):
            raise InvalidJob("expires_in", "must end after run_at: the job could never start")
        return None, float(seconds)
    return None, None


def _pk(value: Any) -> int | None:
    if value is None:
        return None
    return value if isinstance(value, int) else value.pk


def _unsaved_view(row: NewJob, using: str) -> Job:
    """The Job just inserted, built from what we sent instead of read back (no extra query).

    Database-filled times (run_at and created_at default to the database's now) are approximated
    by this host's clock; refresh_from_db() gives the stored values.
    """
    now = timezone.now()
    job = Job(
        id=row.id,
        queue=row.queue,
        handler=row.handler,
        payload=json.loads(row.payload),
        status="pending",
        priority=row.priority,
        run_at=row.run_at or now,
        created_at=now,
        attempt_number=0,
        max_attempts=row.max_attempts,
        account_id=row.account_id,
        created_by_id=row.created_by_id,
        unique_key=row.unique_key,
        expires_at=row.expires_at or (now + timedelta(seconds=row.expires_in) if row.expires_in else None),
    )
    job._state.adding = False
    job._state.db = using
    return job
