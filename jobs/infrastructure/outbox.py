"""The outbox: jobs queued inside a transaction on another database than the queue's, and their move.

With the queue in its own database (JOBS_DATABASE), a caller whose transaction is open on `default` (and
none on the queue's) cannot insert its job with that transaction. So the job is written to `jobs_outbox`
in the caller's database, in the caller's transaction, with the id it will have in the queue: it exists
exactly when that transaction commits, and NOTIFY (`OUTBOX_CHANNEL`, delivered at commit) wakes a worker.
Workers move outbox rows to the queue: take a batch FOR UPDATE SKIP LOCKED (concurrent movers never take
the same rows), insert them in the queue with ON CONFLICT DO NOTHING (a row moved before, by a mover that
died before its delete committed, is not queued twice; a unique key already held is dropped as enqueue
would), commit that, then delete them and commit. A crash between the two commits moves the rows again,
which the conflict clause makes harmless. PostgreSQL only (the queue apart needs PostgreSQL for both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from jobs.infrastructure.store import NewJob, job_columns

OUTBOX_CHANNEL = "relay_jobs_outbox"

# Due times and deadlines are fixed here, by the caller's database's clock at the enqueue (as the queue's
# insert would fix them by its own): a job due "now" is due from its enqueue, so the time it waits in the
# outbox counts in its pickup latency.
PUT = """
    WITH ins AS (
        INSERT INTO jobs_outbox (id, queue, handler, payload, priority, run_at, max_attempts, account_id,
                                 created_by_id, unique_key, expires_at, created_at)
        SELECT n.id, n.queue, n.handler, n.payload, n.priority, coalesce(n.run_at, statement_timestamp()),
               n.max_attempts, n.account_id, n.created_by_id, n.unique_key,
               coalesce(n.expires_at, statement_timestamp() + make_interval(secs => n.expires_in)),
               statement_timestamp()
        FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::int[], %s::timestamptz[],
                    %s::int[], %s::bigint[], %s::int[], %s::text[], %s::timestamptz[], %s::float8[])
             AS n(id, queue, handler, payload, priority, run_at, max_attempts, account_id,
                  created_by_id, unique_key, expires_at, expires_in)
        RETURNING id
    )
    SELECT count(*), pg_notify('relay_jobs_outbox', '') FROM ins
"""

TAKE = """
    SELECT id, queue, handler, payload, priority, run_at, max_attempts, account_id, created_by_id, unique_key,
           expires_at
    FROM jobs_outbox ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
"""

DROP = "DELETE FROM jobs_outbox WHERE id = ANY(%s::uuid[])"

HOLDS = "SELECT id FROM jobs_outbox WHERE id = ANY(%s::uuid[])"

# The queue's side of a move: the jobs as they were put, ON CONFLICT DO NOTHING (any conflict: the id of a
# row moved before, or a unique key an unfinished job holds), waking idle workers for those due.
INSERT_MOVED = """
    WITH ins AS (
        INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,
                              attempt_number, max_attempts, account_id, created_by_id, unique_key,
                              error_message, worker_id, expires_at)
        SELECT n.id, n.queue, n.handler, n.payload::jsonb, 'pending', n.priority, n.run_at, statement_timestamp(),
               0, n.max_attempts, n.account_id, n.created_by_id, n.unique_key, '', '', n.expires_at
        FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[], %s::int[], %s::timestamptz[],
                    %s::int[], %s::bigint[], %s::int[], %s::text[], %s::timestamptz[])
             AS n(id, queue, handler, payload, priority, run_at, max_attempts, account_id,
                  created_by_id, unique_key, expires_at)
        ORDER BY n.id
        ON CONFLICT DO NOTHING
        RETURNING id, queue, run_at
    ),
    woken AS (
        SELECT pg_notify('relay_jobs', queue || ' ' || count(*)) FROM ins
        WHERE run_at <= statement_timestamp() GROUP BY queue
    )
    SELECT id, (SELECT count(*) FROM woken) FROM ins
"""


class OutboxStore:
    """The outbox's statements on one Django connection to a caller's database (PostgreSQL)."""

    def __init__(self, connection) -> None:
        self.connection = connection

    def put(self, jobs: Sequence[NewJob]) -> None:
        """Write jobs to the outbox in the caller's open transaction; a worker is woken at its commit."""
        if not jobs:
            return
        columns = job_columns(jobs)
        with self.connection.cursor() as cursor:
            cursor.execute(PUT, columns)

    def take(self, limit: int) -> list[tuple[Any, ...]]:
        """Up to `limit` rows, locked until the caller's transaction ends (others skip them)."""
        with self.connection.cursor() as cursor:
            cursor.execute(TAKE, [limit])
            return cursor.fetchall()

    def drop(self, ids: Sequence[UUID]) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(DROP, [list(ids)])

    def holding(self, ids: Sequence[UUID]) -> set[UUID]:
        """Which of these jobs are still waiting in this outbox (queued by a commit, not moved yet)."""
        if not ids:
            return set()
        with self.connection.cursor() as cursor:
            cursor.execute(HOLDS, [list(ids)])
            return {row[0] if isinstance(row[0], UUID) else UUID(str(row[0])) for row in cursor.fetchall()}


def insert_moved(queue_connection, rows: Sequence[tuple[Any, ...]]) -> int:
    """Insert taken outbox rows into the queue (on its connection, committing on its own); how many were new."""
    columns: list[list[Any]] = [[row[i] for row in rows] for i in range(11)]
    columns[3] = [p if isinstance(p, str) else str(p) for p in columns[3]]
    with queue_connection.cursor() as cursor:
        cursor.execute(INSERT_MOVED, columns)
        return len(cursor.fetchall())


def held_in_outbox(connection: Any, ids: Sequence[UUID]) -> set[UUID]:
    """Which of these jobs wait in this connection's database's outbox (committed, not moved to the queue yet):
    for another app's store that reads jobs by id with the queue apart."""
    return OutboxStore(connection).holding(ids)
