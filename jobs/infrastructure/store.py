"""Every statement the queue's hot path runs, in one module, as plain SQL.

The worker never builds ORM objects: it claims, acknowledges, fails and
releases jobs through these functions, in batches. There is one dialect per
database: PostgreSQL in production (FOR UPDATE SKIP LOCKED, LISTEN/NOTIFY,
the database clock, so workers on many hosts agree on leases) and SQLite for
a laptop (a conditional UPDATE under SQLite's single writer lock, the host
clock). PostgreSQL's clock is read with statement_timestamp(), not now(),
which would be frozen at the start of a caller's long transaction.

Every write that finishes an attempt is a compare-and-set on
(id, attempt_number, worker_id, status = running): a worker that lost its
lease can never overwrite a newer attempt.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connections, transaction
from django.utils import timezone

NOTIFY_CHANNEL = "relay_jobs"


@dataclass(slots=True)
class NewJob:
    id: UUID
    queue: str
    handler: str
    payload: str  # JSON text
    priority: int
    run_at: datetime | None  # None: now, by the database's clock
    max_attempts: int
    account_id: int | None
    created_by_id: int | None
    unique_key: str | None


@dataclass(slots=True)
class ClaimedJob:
    id: UUID
    handler: str
    payload: dict[str, Any]
    attempt_number: int
    max_attempts: int
    account_id: int | None
    queue: str
    priority: int
    run_at: Any  # only used to order a batch


@dataclass(slots=True)
class Finished:
    """A completed attempt, acknowledged in a batch. Times are the worker's epoch seconds."""

    id: UUID
    attempt_number: int
    started: float
    finished: float


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


class JobStore:
    """The queue's statements for one database alias."""

    vendor = ""

    def __init__(self, using: str = "default") -> None:
        self.using = using

    @property
    def connection(self):  # the calling thread's connection
        return connections[self.using]

    # Implemented per dialect --------------------------------------------------
    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]: ...
    def claim(
        self, worker_id: str, queues: Sequence[str] | None, limit: int, lease_seconds: float
    ) -> list[ClaimedJob]: ...
    def complete(self, worker_id: str, done: Sequence[Finished]) -> set[UUID]: ...
    def fail(
        self,
        worker_id: str,
        job_id: UUID,
        attempt_number: int,
        *,
        status: str,
        error: str,
        delay: float | None,
        started: float,
    ) -> bool: ...
    def release(self, worker_id: str, job_ids: Sequence[UUID] | None = None) -> list[UUID]: ...
    def rescue_expired(self) -> list[tuple[UUID, str, str]]: ...
    def notify(self, queues: Counter[str]) -> None: ...

    # Shared ---------------------------------------------------------------------
    def _rows(self, sql: str, params: Any) -> list[tuple]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []


class PostgresJobStore(JobStore):
    vendor = "postgresql"

    INSERT = """
        WITH ins AS (
            INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                                  attempt_number, max_attempts, account_id, created_by_id, unique_key,
                                  error_message, worker_id)
            SELECT n.id, n.queue, n.handler, n.payload, 'pending', n.priority,
                   coalesce(n.run_at, statement_timestamp()), statement_timestamp(), 0, n.max_attempts,
                   n.account_id, n.created_by_id, n.unique_key, '', ''
            FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::jsonb[], %s::int[], %s::timestamptz[],
                        %s::int[], %s::bigint[], %s::int[], %s::text[])
                 AS n(id, queue, handler, payload, priority, run_at, max_attempts, account_id,
                      created_by_id, unique_key)
            ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running') DO NOTHING
            RETURNING id, queue, run_at
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' ' || count(*)) FROM ins
            WHERE run_at <= statement_timestamp() GROUP BY queue
        )
        SELECT id, (SELECT count(*) FROM woken) FROM ins
    """

    COMPLETE = """
        UPDATE jobs_job j
        SET status = 'completed', started_at = to_timestamp(done.started),
            completed_at = to_timestamp(done.finished), lease_expires_at = NULL
        FROM unnest(%s::uuid[], %s::int[], %s::float8[], %s::float8[]) AS done(id, attempt, started, finished)
        WHERE j.id = done.id AND j.attempt_number = done.attempt
          AND j.status = 'running' AND j.worker_id = %s
        RETURNING j.id
    """

    FAIL = """
        UPDATE jobs_job
        SET status = %(status)s, error_message = %(error)s, failed_at = statement_timestamp(),
            started_at = to_timestamp(%(started)s),
            run_at = CASE WHEN %(delay)s::float8 IS NULL THEN run_at
                          ELSE statement_timestamp() + make_interval(secs => %(delay)s::float8) END,
            retry_delay_seconds = coalesce(%(delay)s::float8, retry_delay_seconds),
            lease_expires_at = NULL
        WHERE id = %(id)s AND attempt_number = %(attempt)s AND status = 'running' AND worker_id = %(worker)s
    """

    RELEASE = """
        UPDATE jobs_job
        SET status = 'pending', attempt_number = attempt_number - 1, lease_expires_at = NULL
        WHERE status = 'running' AND worker_id = %(worker)s {id_filter}
        RETURNING id, queue
    """

    RESCUE = """
        UPDATE jobs_job
        SET status = CASE WHEN attempt_number >= max_attempts THEN 'dead' ELSE 'pending' END,
            failed_at = statement_timestamp(), lease_expires_at = NULL,
            error_message = 'LeaseExpired: worker ' || worker_id
                            || ' stopped before finishing attempt ' || attempt_number
        WHERE status = 'running' AND lease_expires_at < statement_timestamp()
        RETURNING id, status, queue
    """

    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]:
        columns = list(
            zip(
                *(
                    (
                        j.id,
                        j.queue,
                        j.handler,
                        j.payload,
                        j.priority,
                        j.run_at,
                        j.max_attempts,
                        j.account_id,
                        j.created_by_id,
                        j.unique_key,
                    )
                    for j in jobs
                ),
                strict=True,
            )
        )
        inserted = {_uuid(row[0]) for row in self._rows(self.INSERT, [list(c) for c in columns])}
        return self._resolve_conflicts(jobs, inserted)

    def _resolve_conflicts(self, jobs: Sequence[NewJob], inserted: set[UUID]) -> dict[UUID, UUID]:
        """Map each requested id to the id that now holds it: itself, or the unfinished job with its key."""
        result = {j.id: j.id for j in jobs if j.id in inserted}
        missing = [j for j in jobs if j.id not in inserted]
        if missing:
            keys = list({j.unique_key for j in missing})
            rows = self._rows(
                "SELECT unique_key, id FROM jobs_job WHERE unique_key = ANY(%s)"
                " AND status IN ('pending', 'retrying', 'running')",
                [keys],
            )
            holders = {key: _uuid(job_id) for key, job_id in rows}
            # A key taken by an earlier row of the same batch is held by that row.
            holders.update({j.unique_key: j.id for j in jobs if j.id in inserted and j.unique_key})
            for j in missing:
                if j.unique_key not in holders:
                    raise RuntimeError(f"job with unique key {j.unique_key!r} finished while being enqueued")
                result[j.id] = holders[j.unique_key]
        return result

    def claim(self, worker_id: str, queues: Sequence[str] | None, limit: int, lease_seconds: float) -> list[ClaimedJob]:
        """Claim through relay_claim_jobs() (sql/claim_jobs.sql), in one message and one round trip.

        The claim commits asynchronously: should the database server crash
        within the next few hundred milliseconds, a lost claim only puts its
        jobs back to pending, as a dead worker would, while every completion
        and every handler's own writes stay durable.
        """
        params = [worker_id, list(queues) if queues else None, limit, lease_seconds]
        call = "SELECT * FROM relay_claim_jobs(%s, %s::text[], %s, %s)"
        connection = self.connection
        with connection.cursor() as cursor:
            if connection.in_atomic_block:  # inside a caller's transaction: stay in it
                cursor.execute(call, params)
                return _claimed(cursor.fetchall())
            try:
                cursor.execute(f"BEGIN; SET LOCAL synchronous_commit TO off; {call}; COMMIT", params)
                cursor.nextset()
                cursor.nextset()
                rows = cursor.fetchall()
            except BaseException:
                connection.close()  # whatever state the session is in, start afresh
                raise
        return _claimed(rows)

    def complete(self, worker_id: str, done: Sequence[Finished]) -> set[UUID]:
        if not done:
            return set()
        params = [
            [d.id for d in done],
            [d.attempt_number for d in done],
            [d.started for d in done],
            [d.finished for d in done],
            worker_id,
        ]
        return {_uuid(row[0]) for row in self._rows(self.COMPLETE, params)}

    def fail(self, worker_id, job_id, attempt_number, *, status, error, delay, started) -> bool:
        params = {
            "status": status,
            "error": error,
            "delay": delay,
            "started": started,
            "id": job_id,
            "attempt": attempt_number,
            "worker": worker_id,
        }
        with self.connection.cursor() as cursor:
            cursor.execute(self.FAIL, params)
            return cursor.rowcount == 1

    def release(self, worker_id: str, job_ids: Sequence[UUID] | None = None) -> list[UUID]:
        if job_ids is not None and not job_ids:
            return []
        sql = self.RELEASE.format(id_filter="AND id = ANY(%(ids)s)" if job_ids is not None else "")
        with transaction.atomic(using=self.using):
            rows = self._rows(sql, {"worker": worker_id, "ids": list(job_ids or [])})
            self.notify(Counter(queue for _, queue in rows))
        return [_uuid(r[0]) for r in rows]

    def rescue_expired(self) -> list[tuple[UUID, str, str]]:
        with transaction.atomic(using=self.using):
            rows = self._rows(self.RESCUE, [])
            self.notify(Counter(queue for _, status, queue in rows if status == "pending"))
        return [(_uuid(i), s, q) for i, s, q in rows]

    def notify(self, queues: Counter[str]) -> None:
        """Wake idle workers; delivered when (and only if) the caller's transaction commits."""
        for queue, count in queues.items():
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, f"{queue} {count}"])


class SqliteJobStore(JobStore):
    """SQLite: one writer at a time (BEGIN IMMEDIATE), so a conditional UPDATE claims safely."""

    vendor = "sqlite"

    CLAIM = """
        WITH running AS (
            SELECT r.account_id, count(*) AS n FROM jobs_job r
            WHERE r.status = 'running' AND r.account_id IS NOT NULL GROUP BY r.account_id
        ),
        room AS (
            SELECT running.account_id, a.max_concurrent_jobs - running.n AS free
            FROM running JOIN accounts_account a ON a.id = running.account_id
        ),
        candidates AS (
            SELECT j.id, j.account_id, j.priority, j.run_at FROM jobs_job j
            WHERE j.status IN ('pending', 'retrying') AND j.run_at <= %s {queue_filter}
              AND NOT EXISTS (SELECT 1 FROM room WHERE room.account_id = j.account_id AND room.free <= 0)
            ORDER BY j.priority, j.run_at, j.id
            LIMIT %s
        ),
        chosen AS (
            SELECT c.id
            FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id
                                                 ORDER BY c.priority, c.run_at, c.id) AS nth
                  FROM candidates c) c
            LEFT JOIN accounts_account a ON a.id = c.account_id
            LEFT JOIN room ON room.account_id = c.account_id
            WHERE c.account_id IS NULL OR c.nth <= coalesce(room.free, a.max_concurrent_jobs)
        )
        UPDATE jobs_job
        SET status = 'running', attempt_number = attempt_number + 1, started_at = %s,
            lease_expires_at = %s, worker_id = %s
        WHERE id IN (SELECT id FROM chosen) AND status IN ('pending', 'retrying')
        RETURNING id, handler, payload, attempt_number, max_attempts, account_id, queue, priority, run_at
    """

    def _ts(self, value: datetime | float) -> str:
        if isinstance(value, float | int):
            value = datetime.fromtimestamp(value, tz=UTC)
        return self.connection.ops.adapt_datetimefield_value(value)

    def _now(self) -> datetime:
        return timezone.now()

    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]:
        now = self._now()
        result: dict[UUID, UUID] = {}
        with self.connection.cursor() as cursor:
            for j in jobs:
                cursor.execute(
                    "INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,"
                    " attempt_number, max_attempts, account_id, created_by_id, unique_key, error_message,"
                    " worker_id) VALUES (%s, %s, %s, %s, 'pending', %s, %s, %s, 0, %s, %s, %s, %s, '', '')"
                    " ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running') DO NOTHING",
                    [
                        j.id.hex,
                        j.queue,
                        j.handler,
                        j.payload,
                        j.priority,
                        self._ts(j.run_at or now),
                        self._ts(now),
                        j.max_attempts,
                        j.account_id,
                        j.created_by_id,
                        j.unique_key,
                    ],
                )
                if cursor.rowcount == 1:
                    result[j.id] = j.id
                else:
                    cursor.execute(
                        "SELECT id FROM jobs_job WHERE unique_key = %s"
                        " AND status IN ('pending', 'retrying', 'running')",
                        [j.unique_key],
                    )
                    result[j.id] = _uuid(cursor.fetchone()[0])
        return result

    def claim(self, worker_id, queues, limit, lease_seconds) -> list[ClaimedJob]:
        queues = list(queues or [])
        queue_filter = f"AND j.queue IN ({', '.join(['%s'] * len(queues))})" if queues else ""
        now = self._now()
        params = [
            self._ts(now),
            *queues,
            limit,
            self._ts(now),
            self._ts(now + timedelta(seconds=lease_seconds)),
            worker_id,
        ]
        with transaction.atomic(using=self.using):
            rows = self._rows(self.CLAIM.format(queue_filter=queue_filter), params)
        return _claimed(rows)

    def complete(self, worker_id, done) -> set[UUID]:
        acked: set[UUID] = set()
        if not done:
            return acked
        with transaction.atomic(using=self.using), self.connection.cursor() as cursor:
            for d in done:
                cursor.execute(
                    "UPDATE jobs_job SET status = 'completed', started_at = %s, completed_at = %s,"
                    " lease_expires_at = NULL"
                    " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                    [self._ts(d.started), self._ts(d.finished), d.id.hex, d.attempt_number, worker_id],
                )
                if cursor.rowcount == 1:
                    acked.add(d.id)
        return acked

    def fail(self, worker_id, job_id, attempt_number, *, status, error, delay, started) -> bool:
        now = self._now()
        run_at = None if delay is None else self._ts(now + timedelta(seconds=delay))
        with self.connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs_job SET status = %s, error_message = %s, failed_at = %s, started_at = %s,"
                " run_at = coalesce(%s, run_at), retry_delay_seconds = coalesce(%s, retry_delay_seconds),"
                " lease_expires_at = NULL"
                " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                [status, error, self._ts(now), self._ts(started), run_at, delay, job_id.hex, attempt_number, worker_id],
            )
            return cursor.rowcount == 1

    def release(self, worker_id, job_ids=None) -> list[UUID]:
        if job_ids is not None and not job_ids:
            return []
        ids = [i.hex for i in job_ids or []]
        id_filter = f"AND id IN ({', '.join(['%s'] * len(ids))})" if job_ids is not None else ""
        with transaction.atomic(using=self.using):
            rows = self._rows(
                "UPDATE jobs_job SET status = 'pending', attempt_number = attempt_number - 1,"
                f" lease_expires_at = NULL WHERE status = 'running' AND worker_id = %s {id_filter} RETURNING id",
                [worker_id, *ids],
            )
        return [_uuid(r[0]) for r in rows]

    def rescue_expired(self) -> list[tuple[UUID, str, str]]:
        now = self._ts(self._now())
        with transaction.atomic(using=self.using):
            rows = self._rows(
                "UPDATE jobs_job SET status = CASE WHEN attempt_number >= max_attempts THEN 'dead' ELSE 'pending' END,"
                " failed_at = %s, lease_expires_at = NULL,"
                " error_message = 'LeaseExpired: worker ' || worker_id || ' stopped before finishing attempt '"
                " || attempt_number"
                " WHERE status = 'running' AND lease_expires_at < %s RETURNING id, status, queue",
                [now, now],
            )
        return [(_uuid(i), s, q) for i, s, q in rows]

    def notify(self, queues: Counter[str]) -> None:
        """SQLite has no notifications: workers poll."""


def _claimed(rows: list[tuple]) -> list[ClaimedJob]:
    jobs = [
        ClaimedJob(
            id=_uuid(r[0]),
            handler=r[1],
            payload=json.loads(r[2]) if isinstance(r[2], str) else r[2],
            attempt_number=r[3],
            max_attempts=r[4],
            account_id=r[5],
            queue=r[6],
            priority=r[7],
            run_at=r[8],
        )
        for r in rows
    ]
    jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
    return jobs


_STORES: dict[str, type[JobStore]] = {"postgresql": PostgresJobStore, "sqlite": SqliteJobStore}


def get_store(using: str = "default") -> JobStore:
    vendor = connections[using].vendor
    try:
        return _STORES[vendor](using)
    except KeyError:
        raise NotImplementedError(f"Relay's queue runs on PostgreSQL or SQLite, not {vendor}") from None
