"""Every statement the queue's hot path runs, in one module, as plain SQL.

The worker never builds ORM objects: it claims, acknowledges, fails and
releases jobs through these functions, in batches. There is one dialect per
database: PostgreSQL in production (FOR UPDATE SKIP LOCKED, LISTEN/NOTIFY,
the database clock, so workers on many hosts agree on leases) and SQLite for
a laptop (a conditional UPDATE under SQLite's single writer lock, the host
clock). PostgreSQL's clock is read with statement_timestamp() or
clock_timestamp(), never now(), which is frozen at the start of a caller's
long transaction.

A store works on one Django connection. The worker gives each executor a
private connection for the queue's own statements, apart from the one its
handlers use, so nothing a handler does to its connection (a transaction
left open, a broken socket) can reach the queue.

Every write that finishes an attempt is a compare-and-set on
(id, attempt_number, worker_id, status = running): a worker that lost its
lease can never overwrite a newer attempt.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
from django.db import connections
from django.db.utils import load_backend

from jobs.domain.states import pushed_expiry
from jobs.infrastructure import clock
from jobs.infrastructure.database import queue_database

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
    expires_at: datetime | None = None  # the deadline to start by
    expires_in: float | None = None  # or: seconds from the insert, by the database's clock


def job_columns(jobs: Sequence[NewJob]) -> list[list[Any]]:
    """The jobs as one array per column, for an unnest() INSERT (the queue's, and the outbox's)."""
    return [
        [j.id for j in jobs],
        [j.queue for j in jobs],
        [j.handler for j in jobs],
        [j.payload for j in jobs],
        [j.priority for j in jobs],
        [j.run_at for j in jobs],
        [j.max_attempts for j in jobs],
        [j.account_id for j in jobs],
        [j.created_by_id for j in jobs],
        [j.unique_key for j in jobs],
        [j.expires_at for j in jobs],
        [j.expires_in for j in jobs],
    ]


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
    """A completed attempt, acknowledged in a batch. Times are the worker's epoch seconds (its host's clock,
    `clock.host_time`): only how long before the acknowledgement they were is stored, subtracted from the
    database's now, so a worker whose clock is off still stamps started_at and completed_at on the database's
    clock (and the duration exactly)."""

    id: UUID
    attempt_number: int
    started: float
    finished: float


class ClaimInsideTransaction(RuntimeError):
    """A claim must commit on its own: inside a caller's transaction it would hold the claim lock."""


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


class JobStore:
    """The queue's statements, on one Django database connection."""

    vendor = ""
    BEGIN = "BEGIN"

    def __init__(self, connection) -> None:
        self.connection = connection

    # Implemented per dialect --------------------------------------------------
    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]:
        """Insert jobs; map each requested id to the id that holds it (itself, or the unfinished key holder)."""
        raise NotImplementedError

    def claim(self, worker_id: str, queues: Sequence[str] | None, limit: int, lease_seconds: float) -> list[ClaimedJob]:
        raise NotImplementedError

    def complete(self, worker_id: str, done: Sequence[Finished]) -> set[UUID]:
        raise NotImplementedError

    def complete_and_insert(
        self, worker_id: str, done: Finished, jobs: Sequence[NewJob]
    ) -> tuple[bool, dict[UUID, UUID]]:
        """Complete one job and insert the jobs that follow it; nothing is inserted if the completion is refused."""
        acked, holders = self.complete_many_and_insert(worker_id, [done], jobs)
        return bool(acked), holders

    def complete_many_and_insert(
        self, worker_id: str, done: Sequence[Finished], jobs: Sequence[NewJob]
    ) -> tuple[set[UUID], dict[UUID, UUID]]:
        """Complete several jobs and insert the jobs that follow them; nothing is inserted unless all complete.

        Returns the completed ids and, for each inserted job, the id of the job that holds its place.
        """
        acked = self.complete(worker_id, done)
        if len(acked) != len(done):
            return acked, {}
        return acked, (self.insert(jobs) if jobs else {})

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
    ) -> bool:
        raise NotImplementedError

    def snooze(self, worker_id: str, job_id: UUID, attempt_number: int, *, delay: float, started: float) -> bool:
        """A handler snoozed its job: back to pending, due `delay` seconds from the database's now, its attempt
        uncounted and `snoozes` one more; a deadline moves as for a planned retry (`pushed_expiry`). The
        compare-and-set of every finish: False when this worker no longer holds the attempt."""
        raise NotImplementedError

    def release(self, worker_id: str, job_ids: Sequence[UUID] | None = None, delay: float = 0.0) -> list[UUID]:
        """Put running jobs back to pending without counting the attempt (due after `delay` seconds)."""
        raise NotImplementedError

    def expire_overdue(self, limit: int = 1000) -> list[UUID]:
        """Dead-letter waiting jobs past their deadline (never started), on the database's clock; their ids."""
        raise NotImplementedError

    def rescue_expired(self) -> list[tuple[UUID, str, str]]:
        """Jobs whose lease passed (their worker died): pending again, the attempt counted; dead on the last."""
        raise NotImplementedError

    def notify(self, queues: Counter[str]) -> None:
        raise NotImplementedError

    def holds(self, worker_id: str, job_id: UUID, attempt_number: int) -> bool:
        """Whether this worker still holds this attempt of the job (running, its worker, its attempt)."""
        return bool(
            self._rows(
                "SELECT 1 FROM jobs_job"
                " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                [self._id(job_id), attempt_number, worker_id],
            )
        )

    def describe(self, job_ids: Sequence[UUID]) -> list[tuple[UUID, str, dict[str, Any], str]]:
        """(id, handler, payload, error_message) of these jobs: the rare path of a dead letter."""
        if not job_ids:
            return []
        marks = ", ".join(["%s"] * len(job_ids))
        rows = self._rows(
            f"SELECT id, handler, payload, error_message FROM jobs_job WHERE id IN ({marks})",
            [self._id(job_id) for job_id in job_ids],
        )
        return [(_uuid(i), h, json.loads(p) if isinstance(p, str | bytes) else p, e) for i, h, p, e in rows]

    def _id(self, job_id: UUID) -> Any:
        return job_id

    # Shared ---------------------------------------------------------------------
    def _rows(self, sql: str, params: Any) -> list[tuple]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            # Every caller's statement returns rows; psycopg builds `description` anew on each access.
            return cursor.fetchall()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """A transaction of its own, or the caller's if one is open (then commit is the caller's)."""
        connection = self.connection
        if connection.in_atomic_block:
            yield
            return
        with connection.cursor() as cursor:
            cursor.execute(self.BEGIN)
            try:
                yield
            except BaseException:
                try:
                    cursor.execute("ROLLBACK")
                except Exception:
                    connection.close()
                raise
            cursor.execute("COMMIT")


class PostgresJobStore(JobStore):
    vendor = "postgresql"

    INSERT = """
        WITH ins AS (
            INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                                  attempt_number, max_attempts, account_id, created_by_id, unique_key,
                                  error_message, worker_id, expires_at)
            SELECT n.id, n.queue, n.handler, n.payload, 'pending', n.priority,
                   coalesce(n.run_at, statement_timestamp()), statement_timestamp(), 0, n.max_attempts,
                   n.account_id, n.created_by_id, n.unique_key, '', '',
                   coalesce(n.expires_at, statement_timestamp() + make_interval(secs => n.expires_in))
            FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::jsonb[], %s::int[], %s::timestamptz[],
                        %s::int[], %s::bigint[], %s::int[], %s::text[], %s::timestamptz[], %s::float8[])
                 AS n(id, queue, handler, payload, priority, run_at, max_attempts, account_id,
                      created_by_id, unique_key, expires_at, expires_in)
            ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running')
                                      AND unique_key IS NOT NULL DO NOTHING
            RETURNING id, queue, run_at
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' ' || count(*)) FROM ins
            WHERE run_at <= statement_timestamp() GROUP BY queue
        )
        SELECT id, (SELECT count(*) FROM woken) FROM ins
    """

    # One job: the same statement with plain VALUES (cheaper to send than ten one-element arrays).
    INSERT_ONE = """
        WITH ins AS (
            INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                                  attempt_number, max_attempts, account_id, created_by_id, unique_key,
                                  error_message, worker_id, expires_at)
            VALUES (%s, %s, %s, %s::jsonb, 'pending', %s, coalesce(%s::timestamptz, statement_timestamp()),
                    statement_timestamp(), 0, %s, %s, %s, %s, '', '',
                    coalesce(%s::timestamptz, statement_timestamp() + make_interval(secs => %s::float8)))
            ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running')
                                      AND unique_key IS NOT NULL DO NOTHING
            RETURNING id, queue, run_at
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' 1') FROM ins WHERE run_at <= statement_timestamp()
        )
        SELECT id, (SELECT count(*) FROM woken) FROM ins
    """

    # The claim is the function relay_claim_jobs() in sql/claim_jobs.sql.
    CLAIM = "SELECT * FROM relay_claim_jobs(%s, %s::text[], %s, %s)"

    COMPLETE_ONE = """
        UPDATE jobs_job
        SET status = 'completed', started_at = statement_timestamp() - make_interval(secs => %s::float8),
            completed_at = statement_timestamp() - make_interval(secs => %s::float8), lease_expires_at = NULL
        WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s
        RETURNING id
    """

    # Complete a job and insert the one that follows it, in one statement (the workflow engine's step path).
    # No NOTIFY: the worker finishing this job claims again as soon as its batch is done and takes what
    # follows itself; waking every idle worker for it would cost each of them a claim (and NOTIFY
    # serializes commits on PostgreSQL). Other workers still see it at their next claim or poll.
    COMPLETE_AND_INSERT_ONE = """
        WITH done AS (
            UPDATE jobs_job
            SET status = 'completed', started_at = statement_timestamp() - make_interval(secs => %s::float8),
                completed_at = statement_timestamp() - make_interval(secs => %s::float8), lease_expires_at = NULL
            WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s
            RETURNING id
        ),
        ins AS (
            INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                                  attempt_number, max_attempts, account_id, created_by_id, unique_key,
                                  error_message, worker_id, expires_at)
            SELECT %s::uuid, %s::text, %s::text, %s::jsonb, 'pending', %s::int,
                   coalesce(%s::timestamptz, statement_timestamp()), statement_timestamp(), 0, %s::int,
                   %s::bigint, %s::int, %s::text, '', '',
                   coalesce(%s::timestamptz, statement_timestamp() + make_interval(secs => %s::float8))
            WHERE EXISTS (SELECT 1 FROM done)
            ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running')
                                      AND unique_key IS NOT NULL DO NOTHING
            RETURNING id
        )
        SELECT (SELECT count(*) FROM done), (SELECT id FROM ins)
    """

    # A batch handler's completions and what follows them, in one statement and without NOTIFY (as above).
    # The rows travel as two JSON documents: the statement's text stays the same whatever their number
    # (prepared once), and encoding JSON costs the worker far less than one parameter per value.
    COMPLETE_MANY_AND_INSERT = """
        WITH done AS (
            UPDATE jobs_job j
            SET status = 'completed', started_at = statement_timestamp() - make_interval(secs => d.started_ago),
                completed_at = statement_timestamp() - make_interval(secs => d.finished_ago), lease_expires_at = NULL
            FROM jsonb_to_recordset(%s::jsonb)
                 AS d(id uuid, attempt int, started_ago float8, finished_ago float8)
            WHERE j.id = ANY(%s::uuid[]) AND j.id = d.id AND j.attempt_number = d.attempt
              AND j.status = 'running' AND j.worker_id = %s
            RETURNING j.id
        ),
        ins AS (
            INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                                  attempt_number, max_attempts, account_id, created_by_id, unique_key,
                                  error_message, worker_id, expires_at)
            SELECT n.id, n.queue, n.handler, n.payload::jsonb, 'pending', n.priority,
                   coalesce(n.run_at, statement_timestamp()), statement_timestamp(), 0, n.max_attempts,
                   n.account_id, n.created_by_id, n.unique_key, '', '',
                   coalesce(n.expires_at, statement_timestamp() + make_interval(secs => n.expires_in))
            FROM jsonb_to_recordset(%s::jsonb)
                 AS n(id uuid, queue text, handler text, payload text, priority int, run_at timestamptz,
                      max_attempts int, account_id bigint, created_by_id int, unique_key text,
                      expires_at timestamptz, expires_in float8)
            WHERE (SELECT count(*) FROM done) = %s
            ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running')
                                      AND unique_key IS NOT NULL DO NOTHING
            RETURNING id
        )
        SELECT true, id FROM done UNION ALL SELECT false, id FROM ins
    """

    # A batch's completions. No join: each row finds its attempt and times by its position in the id array.
    # A join with unnest(...) was planned (generic plan, statistics taken with few jobs running) as a nested
    # loop that re-read the whole unnest once per row: 100 x 100 rows, 3.8 of the statement's 5 ms for a
    # batch of 100 (issue 15). array_position is linear, but over one batch (JOB_BATCH_SIZE) that is cheap.
    COMPLETE = """
        UPDATE jobs_job j
        SET status = 'completed',
            started_at = statement_timestamp()
                         - make_interval(secs => (%(started_ago)s::float8[])[array_position(%(ids)s::uuid[], j.id)]),
            completed_at = statement_timestamp()
                           - make_interval(secs => (%(finished_ago)s::float8[])[array_position(%(ids)s::uuid[], j.id)]),
            lease_expires_at = NULL
        WHERE j.id = ANY(%(ids)s::uuid[])
          AND j.attempt_number = (%(attempts)s::int[])[array_position(%(ids)s::uuid[], j.id)]
          AND j.status = 'running' AND j.worker_id = %(worker)s
        RETURNING j.id
    """

    FAIL = """
        UPDATE jobs_job
        SET status = %(status)s::varchar, error_message = %(error)s, failed_at = statement_timestamp(),
            started_at = statement_timestamp() - make_interval(secs => %(started_ago)s::float8),
            run_at = CASE WHEN %(delay)s::float8 IS NULL THEN run_at
                          ELSE statement_timestamp() + make_interval(secs => %(delay)s::float8) END,
            retry_delay_seconds = coalesce(%(delay)s::float8, retry_delay_seconds),
            lease_expires_at = NULL,
            -- jobs.domain.states.pushed_expiry: a planned retry keeps the window the job had after its due time
            expires_at = CASE WHEN expires_at IS NULL OR %(delay)s::float8 IS NULL OR %(status)s::varchar <> 'retrying'
                              THEN expires_at
                              ELSE greatest(expires_at, statement_timestamp() + make_interval(secs => %(delay)s::float8)
                                                        + greatest(expires_at - run_at, interval '1 second')) END
        WHERE id = %(id)s AND attempt_number = %(attempt)s AND status = 'running' AND worker_id = %(worker)s
    """

    # Jobs past their deadline, never started (the claim skips them): dead letters with the reason "expired".
    EXPIRE = """
        WITH overdue AS (
            SELECT id FROM jobs_job
            WHERE status IN ('pending', 'retrying') AND expires_at IS NOT NULL AND expires_at <= clock_timestamp()
            ORDER BY expires_at
            LIMIT %s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE jobs_job j
        SET status = 'dead', failed_at = clock_timestamp(), lease_expires_at = NULL,
            error_message = 'JobExpired: not started before its deadline '
                            || to_char(j.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        FROM overdue
        WHERE j.id = overdue.id
        RETURNING j.id
    """

    # A handler's snooze: the release of one attempt (uncounted, due later) under the finish's compare-and-set,
    # counted in `snoozes`; a deadline moves as FAIL moves it for a planned retry (pushed_expiry).
    SNOOZE = """
        WITH snoozed AS (
            UPDATE jobs_job
            SET status = 'pending', attempt_number = attempt_number - 1, snoozes = snoozes + 1,
                started_at = statement_timestamp() - make_interval(secs => %(started_ago)s::float8),
                run_at = statement_timestamp() + make_interval(secs => %(delay)s::float8),
                lease_expires_at = NULL,
                expires_at = CASE WHEN expires_at IS NULL THEN NULL
                             ELSE greatest(expires_at, statement_timestamp() + make_interval(secs => %(delay)s::float8)
                                                       + greatest(expires_at - run_at, interval '1 second')) END
            WHERE id = %(id)s AND attempt_number = %(attempt)s AND status = 'running' AND worker_id = %(worker)s
            RETURNING queue
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' 1') FROM snoozed WHERE %(delay)s::float8 = 0
        )
        SELECT (SELECT count(*) FROM snoozed), (SELECT count(*) FROM woken)
    """

    RELEASE = """
        WITH released AS (
            UPDATE jobs_job
            SET status = 'pending', attempt_number = attempt_number - 1, lease_expires_at = NULL,
                run_at = statement_timestamp() + make_interval(secs => %(delay)s::float8)
            WHERE status = 'running' AND worker_id = %(worker)s {id_filter}
            RETURNING id, queue
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' ' || count(*)) FROM released
            WHERE %(delay)s::float8 = 0 GROUP BY queue
        )
        SELECT id, (SELECT count(*) FROM woken) FROM released
    """

    RESCUE = """
        WITH expired AS (
            SELECT id FROM jobs_job
            WHERE status = 'running' AND lease_expires_at < clock_timestamp()
            FOR UPDATE SKIP LOCKED
        ),
        rescued AS (
            UPDATE jobs_job j
            SET status = CASE WHEN j.attempt_number >= j.max_attempts THEN 'dead' ELSE 'pending' END,
                failed_at = clock_timestamp(), lease_expires_at = NULL,
                error_message = 'LeaseExpired: worker ' || j.worker_id
                                || ' stopped before finishing attempt ' || j.attempt_number
            FROM expired
            WHERE j.id = expired.id
            RETURNING j.id, j.status, j.queue
        ),
        woken AS (
            SELECT pg_notify('relay_jobs', queue || ' ' || count(*)) FROM rescued
            WHERE status = 'pending' GROUP BY queue
        )
        SELECT id, status, queue, (SELECT count(*) FROM woken) FROM rescued
    """

    @staticmethod
    def _values(j: NewJob) -> list[Any]:
        return [
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
            j.expires_at,
            j.expires_in,
        ]

    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]:
        if len(jobs) == 1:
            inserted = {_uuid(row[0]) for row in self._rows(self.INSERT_ONE, self._values(jobs[0]))}
            return self._resolve_conflicts(jobs, inserted)
        inserted = {_uuid(row[0]) for row in self._rows(self.INSERT, job_columns(jobs))}
        return self._resolve_conflicts(jobs, inserted)

    def _resolve_conflicts(self, jobs: Sequence[NewJob], inserted: set[UUID]) -> dict[UUID, UUID]:
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
        """Claim through relay_claim_jobs(), in one message and one round trip.

        The claim commits asynchronously (it saves a disk flush on the pickup
        path). A claim lost in a database server crash returns its jobs to
        pending, as a dead worker would; a handler's own commit (and so
        `mark_completed`) flushes the log up to and including its claim first.
        """
        connection = self.connection
        if connection.in_atomic_block:
            raise ClaimInsideTransaction("claim jobs outside any transaction")
        params = [worker_id, list(queues) if queues else None, limit, lease_seconds]
        with connection.wrap_database_errors:
            connection.ensure_connection()
            # Several statements in one message need client-side binding, whatever the connection's default.
            cursor = psycopg.ClientCursor(connection.connection)
            try:
                cursor.execute(f"BEGIN; SET LOCAL synchronous_commit TO off; {self.CLAIM}; COMMIT", params)
                cursor.nextset()
                cursor.nextset()
                rows = cursor.fetchall()
            except BaseException:
                connection.close()  # whatever state the session is in, start afresh
                raise
            finally:
                cursor.close()
        return _claimed(rows)

    def complete(self, worker_id: str, done: Sequence[Finished]) -> set[UUID]:
        if not done:
            return set()
        if len(done) == 1:
            d = done[0]
            rows = self._rows(
                self.COMPLETE_ONE, [*clock.ages(d.started, d.finished), d.id, d.attempt_number, worker_id]
            )
            return {_uuid(row[0]) for row in rows}
        sent = clock.host_time()
        ages = [clock.ages(d.started, d.finished, at=sent) for d in done]
        params = {
            "ids": [d.id for d in done],
            "attempts": [d.attempt_number for d in done],
            "started_ago": [started for started, _finished in ages],
            "finished_ago": [finished for _started, finished in ages],
            "worker": worker_id,
        }
        return {_uuid(row[0]) for row in self._rows(self.COMPLETE, params)}

    def complete_and_insert(self, worker_id, done, jobs) -> tuple[bool, dict[UUID, UUID]]:
        if len(jobs) != 1:
            return super().complete_and_insert(worker_id, done, jobs)
        params = [*clock.ages(done.started, done.finished), done.id, done.attempt_number, worker_id]
        params += self._values(jobs[0])
        ((completed, inserted_id),) = self._rows(self.COMPLETE_AND_INSERT_ONE, params)
        if not completed:
            return False, {}
        return True, self._resolve_conflicts(jobs, {_uuid(inserted_id)} if inserted_id else set())

    def complete_many_and_insert(self, worker_id, done, jobs) -> tuple[set[UUID], dict[UUID, UUID]]:
        if not done:
            return set(), {}
        sent = clock.host_time()
        params = [
            json.dumps(
                [
                    {"id": str(d.id), "attempt": d.attempt_number, "started_ago": ago[0], "finished_ago": ago[1]}
                    for d in done
                    for ago in [clock.ages(d.started, d.finished, at=sent)]
                ]
            ),
            [d.id for d in done],  # for the index scan: the planner cannot see into a JSON document's rows
            worker_id,
            json.dumps(
                [
                    {
                        "id": str(j.id),
                        "queue": j.queue,
                        "handler": j.handler,
                        "payload": j.payload,
                        "priority": j.priority,
                        "run_at": j.run_at.isoformat() if j.run_at is not None else None,
                        "max_attempts": j.max_attempts,
                        "account_id": j.account_id,
                        "created_by_id": j.created_by_id,
                        "unique_key": j.unique_key,
                        "expires_at": j.expires_at.isoformat() if j.expires_at is not None else None,
                        "expires_in": j.expires_in,
                    }
                    for j in jobs
                ]
            ),
            len(done),
        ]
        acked: set[UUID] = set()
        inserted: set[UUID] = set()
        for completed, job_id in self._rows(self.COMPLETE_MANY_AND_INSERT, params):
            (acked if completed else inserted).add(_uuid(job_id))
        if len(acked) != len(done):
            return acked, {}
        return acked, self._resolve_conflicts(jobs, inserted)

    def fail(self, worker_id, job_id, attempt_number, *, status, error, delay, started) -> bool:
        params = {
            "status": status,
            "error": error,
            "delay": delay,
            "started_ago": clock.ages(started)[0],
            "id": job_id,
            "attempt": attempt_number,
            "worker": worker_id,
        }
        with self.connection.cursor() as cursor:
            cursor.execute(self.FAIL, params)
            return cursor.rowcount == 1

    def snooze(self, worker_id, job_id, attempt_number, *, delay, started) -> bool:
        params = {
            "delay": float(delay),
            "started_ago": clock.ages(started)[0],
            "id": job_id,
            "attempt": attempt_number,
            "worker": worker_id,
        }
        rows = self._rows(self.SNOOZE, params)
        return bool(rows and rows[0][0] == 1)

    def release(self, worker_id: str, job_ids: Sequence[UUID] | None = None, delay: float = 0.0) -> list[UUID]:
        if job_ids is not None and not job_ids:
            return []
        sql = self.RELEASE.format(id_filter="AND id = ANY(%(ids)s)" if job_ids is not None else "")
        rows = self._rows(sql, {"worker": worker_id, "ids": list(job_ids or []), "delay": float(delay)})
        return [_uuid(r[0]) for r in rows]

    def rescue_expired(self) -> list[tuple[UUID, str, str]]:
        return [(_uuid(i), s, q) for i, s, q, _ in self._rows(self.RESCUE, [])]

    def expire_overdue(self, limit: int = 1000) -> list[UUID]:
        return [_uuid(row[0]) for row in self._rows(self.EXPIRE, [limit])]

    def notify(self, queues: Counter[str]) -> None:
        """Wake idle workers; delivered when (and only if) the caller's transaction commits."""
        for queue, count in queues.items():
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, f"{queue} {count}"])


class SqliteJobStore(JobStore):
    """SQLite: one writer at a time (BEGIN IMMEDIATE), so a conditional UPDATE claims safely."""

    vendor = "sqlite"
    BEGIN = "BEGIN IMMEDIATE"

    def _id(self, job_id: UUID) -> Any:
        return job_id.hex  # SQLite keeps UUIDs as 32 hex digits

    CLAIM = """
        WITH running AS (
            SELECT r.account_id, count(*) AS n FROM jobs_job r
            WHERE r.status = 'running' GROUP BY r.account_id  -- job_running, as relay_claim_jobs()
        ),
        room AS (
            SELECT running.account_id, coalesce(a.max_concurrent_jobs, 10) - running.n AS free
            FROM running LEFT JOIN jobs_account_limit a ON a.account_id = running.account_id
        ),
        candidates AS (
            SELECT j.id, j.account_id, j.priority, j.run_at FROM jobs_job j
            WHERE j.status IN ('pending', 'retrying') AND j.run_at <= %s {queue_filter}
              AND (j.expires_at IS NULL OR j.expires_at > %s)
              AND NOT EXISTS (SELECT 1 FROM room WHERE room.account_id = j.account_id AND room.free <= 0)
            ORDER BY j.priority, j.run_at, j.id
            LIMIT %s
        ),
        chosen AS (
            SELECT c.id
            FROM (SELECT c.*, row_number() OVER (PARTITION BY c.account_id
                                                 ORDER BY c.priority, c.run_at, c.id) AS nth
                  FROM candidates c) c
            LEFT JOIN jobs_account_limit a ON a.account_id = c.account_id
            LEFT JOIN room ON room.account_id = c.account_id
            WHERE c.account_id IS NULL OR c.nth <= coalesce(room.free, a.max_concurrent_jobs, 10)
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
        """The database's now: this host's clock (SQLite runs on one host), through the same seam as PostgreSQL's."""
        return clock.now_of(self.connection)

    def _on_database_clock(self, now: datetime, *moments: float) -> list[str]:
        """Host-clock moments (a worker's epoch seconds) as stored times: `now` less how long ago each was."""
        return [self._ts(now - timedelta(seconds=age)) for age in clock.ages(*moments)]

    def insert(self, jobs: Sequence[NewJob]) -> dict[UUID, UUID]:
        now = self._now()
        result: dict[UUID, UUID] = {}
        with self.connection.cursor() as cursor:
            for j in jobs:
                cursor.execute(
                    "INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,"
                    " attempt_number, max_attempts, account_id, created_by_id, unique_key, error_message,"
                    " worker_id, expires_at)"
                    " VALUES (%s, %s, %s, %s, 'pending', %s, %s, %s, 0, %s, %s, %s, %s, '', '', %s)"
                    " ON CONFLICT (unique_key) WHERE status IN ('pending', 'retrying', 'running')"
                    " AND unique_key IS NOT NULL DO NOTHING",
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
                        self._expiry(j, now),
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

    def _expiry(self, job: NewJob, now: datetime) -> str | None:
        if job.expires_at is not None:
            return self._ts(job.expires_at)
        if job.expires_in is not None:
            return self._ts(now + timedelta(seconds=job.expires_in))
        return None

    def claim(self, worker_id, queues, limit, lease_seconds) -> list[ClaimedJob]:
        if self.connection.in_atomic_block:
            raise ClaimInsideTransaction("claim jobs outside any transaction")
        queues = list(queues or [])
        queue_filter = f"AND j.queue IN ({', '.join(['%s'] * len(queues))})" if queues else ""
        sql = self.CLAIM.format(queue_filter=queue_filter)
        rows: list[tuple] = []
        with self._transaction():
            now = self._now()  # after BEGIN IMMEDIATE: waiting for the write lock never shortens a lease
            lease = self._ts(now + timedelta(seconds=lease_seconds))
            # Again while it finds jobs: an account capped at its limit is skipped by the next round.
            while len(rows) < limit:
                found = self._rows(
                    sql, [self._ts(now), *queues, self._ts(now), limit - len(rows), self._ts(now), lease, worker_id]
                )
                if not found:
                    break
                rows.extend(found)
        return _claimed(rows)

    def complete(self, worker_id, done) -> set[UUID]:
        acked: set[UUID] = set()
        if not done:
            return acked
        with self._transaction(), self.connection.cursor() as cursor:
            now = self._now()
            for d in done:
                cursor.execute(
                    "UPDATE jobs_job SET status = 'completed', started_at = %s, completed_at = %s,"
                    " lease_expires_at = NULL"
                    " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                    [*self._on_database_clock(now, d.started, d.finished), d.id.hex, d.attempt_number, worker_id],
                )
                if cursor.rowcount == 1:
                    acked.add(d.id)
        return acked

    def fail(self, worker_id, job_id, attempt_number, *, status, error, delay, started) -> bool:
        with self._transaction(), self.connection.cursor() as cursor:
            now = self._now()  # after BEGIN IMMEDIATE: a retry is due its delay after the failure is written
            next_run = None if delay is None else now + timedelta(seconds=delay)
            run_at = None if next_run is None else self._ts(next_run)
            expires_at = None
            if next_run is not None and status == "retrying":
                cursor.execute("SELECT expires_at, run_at FROM jobs_job WHERE id = %s", [job_id.hex])
                row = cursor.fetchone()
                if row is not None and row[0] is not None:
                    parse = self.connection.ops.convert_datetimefield_value
                    old_expiry, old_run = (parse(v, None, self.connection) for v in row)
                    pushed = pushed_expiry(old_expiry, old_run, next_run)
                    expires_at = self._ts(pushed) if pushed is not None else None
            cursor.execute(
                "UPDATE jobs_job SET status = %s, error_message = %s, failed_at = %s, started_at = %s,"
                " run_at = coalesce(%s, run_at), retry_delay_seconds = coalesce(%s, retry_delay_seconds),"
                " lease_expires_at = NULL, expires_at = coalesce(%s, expires_at)"
                " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                [
                    status,
                    error,
                    self._ts(now),
                    *self._on_database_clock(now, started),
                    run_at,
                    delay,
                    expires_at,
                    job_id.hex,
                    attempt_number,
                    worker_id,
                ],
            )
            return cursor.rowcount == 1

    def snooze(self, worker_id, job_id, attempt_number, *, delay, started) -> bool:
        with self._transaction(), self.connection.cursor() as cursor:
            now = self._now()  # after BEGIN IMMEDIATE, as fail: due its delay after the snooze is written
            due = now + timedelta(seconds=delay)
            cursor.execute("SELECT expires_at, run_at FROM jobs_job WHERE id = %s", [job_id.hex])
            row = cursor.fetchone()
            expires_at = None
            if row is not None and row[0] is not None:
                parse = self.connection.ops.convert_datetimefield_value
                old_expiry, old_run = (parse(v, None, self.connection) for v in row)
                pushed = pushed_expiry(old_expiry, old_run, due)
                expires_at = self._ts(pushed) if pushed is not None else None
            cursor.execute(
                "UPDATE jobs_job SET status = 'pending', attempt_number = attempt_number - 1,"
                " snoozes = snoozes + 1, started_at = %s, run_at = %s, lease_expires_at = NULL,"
                " expires_at = coalesce(%s, expires_at)"
                " WHERE id = %s AND attempt_number = %s AND status = 'running' AND worker_id = %s",
                [
                    *self._on_database_clock(now, started),
                    self._ts(due),
                    expires_at,
                    job_id.hex,
                    attempt_number,
                    worker_id,
                ],
            )
            return cursor.rowcount == 1

    def expire_overdue(self, limit: int = 1000) -> list[UUID]:
        now = self._ts(self._now())
        rows = self._rows(
            "UPDATE jobs_job SET status = 'dead', failed_at = %s, lease_expires_at = NULL,"
            " error_message = 'JobExpired: not started before its deadline '"
            " || strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', expires_at)"
            " WHERE id IN (SELECT id FROM jobs_job WHERE status IN ('pending', 'retrying')"
            " AND expires_at IS NOT NULL AND expires_at <= %s ORDER BY expires_at LIMIT %s) RETURNING id",
            [now, now, limit],
        )
        return [_uuid(r[0]) for r in rows]

    def release(self, worker_id, job_ids=None, delay: float = 0.0) -> list[UUID]:
        if job_ids is not None and not job_ids:
            return []
        ids = [i.hex for i in job_ids or []]
        id_filter = f"AND id IN ({', '.join(['%s'] * len(ids))})" if job_ids is not None else ""
        run_at = self._ts(self._now() + timedelta(seconds=delay))
        rows = self._rows(
            "UPDATE jobs_job SET status = 'pending', attempt_number = attempt_number - 1, lease_expires_at = NULL,"
            f" run_at = %s WHERE status = 'running' AND worker_id = %s {id_filter} RETURNING id",
            [run_at, worker_id, *ids],
        )
        return [_uuid(r[0]) for r in rows]

    def rescue_expired(self) -> list[tuple[UUID, str, str]]:
        now = self._ts(self._now())
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


def store_for(connection) -> JobStore:
    """The store for a Django connection (a thread's connection, or a private one)."""
    try:
        return _STORES[connection.vendor](connection)
    except KeyError:
        raise NotImplementedError(f"Relay's queue runs on PostgreSQL or SQLite, not {connection.vendor}") from None


def get_store(using: str | None = None) -> JobStore:
    """The store on this thread's connection to `using` (joins the caller's transaction where it can)."""
    using = using or queue_database()
    return store_for(connections[using])


def private_connection(using: str | None = None, *, statement_seconds: float = 30.0, lock_seconds: float = 10.0):
    """A connection of its own, apart from the thread's, for the worker's queue statements.

    On PostgreSQL its statements and lock waits are bounded (applied at every
    reconnection), so no row lock or hung query can stall a worker forever.
    """
    using = using or queue_database()
    settings_dict = copy.deepcopy(connections.settings[using])
    if settings_dict["ENGINE"].endswith("postgresql"):
        options = settings_dict.setdefault("OPTIONS", {})
        limits = f"-c statement_timeout={int(statement_seconds * 1000)} -c lock_timeout={int(lock_seconds * 1000)}"
        options["options"] = f"{options.get('options', '')} {limits}".strip()
    return load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, using)
