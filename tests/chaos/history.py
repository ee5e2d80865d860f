"""What the queue did to each job, as the database saw it: every change of a `jobs_job` row, recorded by
triggers in the writer's own transaction, stamped with the database's clock and the writing session's
`application_name` (each chaos worker process has its own, PGAPPNAME).

The invariants read this history rather than the job's last row: a row keeps only its latest `run_at`,
`failed_at` and lease, and a claim handed back unstarted rewrites `run_at`, so the last row cannot say when a
retry was due or which process completed the job. The trigger is the chaos suite's, installed for a scenario
and dropped after it (never in the application's schema); a private cluster's database copies it with the
schema.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

# Statement-level triggers over the statement's transition tables: one insert per statement however many rows
# it changed (a claim or an acknowledgement changes a batch), and no index to maintain while the scenario runs
# (a history is read once, at the end). A row-level trigger slowed a 10,000-job drain by about a fifth.
INSTALL = """
    CREATE TABLE IF NOT EXISTS chaos_job_history (
        id bigserial,
        job_id uuid NOT NULL,
        at timestamptz NOT NULL DEFAULT clock_timestamp(),
        old_status text,
        status text NOT NULL,
        old_attempt integer,
        attempt integer NOT NULL,
        worker_id text NOT NULL,
        app text NOT NULL,
        run_at timestamptz,
        failed_at timestamptz,
        retry_delay float8,
        lease_expires_at timestamptz,
        created_at timestamptz,
        started_at timestamptz,
        completed_at timestamptz,
        error text
    );
    CREATE OR REPLACE FUNCTION chaos_record_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chaos_job_history (job_id, old_status, status, old_attempt, attempt, worker_id, app, run_at,
                                       failed_at, retry_delay, lease_expires_at, created_at, started_at,
                                       completed_at, error)
        SELECT n.id, NULL, n.status, NULL, n.attempt_number, n.worker_id, current_setting('application_name'),
               n.run_at, n.failed_at, n.retry_delay_seconds, n.lease_expires_at, n.created_at, n.started_at,
               n.completed_at, left(n.error_message, 80)
        FROM inserted n;
        RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION chaos_record_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chaos_job_history (job_id, old_status, status, old_attempt, attempt, worker_id, app, run_at,
                                       failed_at, retry_delay, lease_expires_at, created_at, started_at,
                                       completed_at, error)
        SELECT n.id, o.status, n.status, o.attempt_number, n.attempt_number, n.worker_id,
               current_setting('application_name'), n.run_at, n.failed_at, n.retry_delay_seconds,
               n.lease_expires_at, n.created_at, n.started_at, n.completed_at, left(n.error_message, 80)
        FROM changed n JOIN before o ON o.id = n.id
        WHERE o.status IS DISTINCT FROM n.status OR o.attempt_number IS DISTINCT FROM n.attempt_number
           OR o.run_at IS DISTINCT FROM n.run_at OR o.lease_expires_at IS DISTINCT FROM n.lease_expires_at;
        RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS chaos_job_inserted ON jobs_job;
    DROP TRIGGER IF EXISTS chaos_job_changed ON jobs_job;
    CREATE TRIGGER chaos_job_inserted AFTER INSERT ON jobs_job REFERENCING NEW TABLE AS inserted
        FOR EACH STATEMENT EXECUTE FUNCTION chaos_record_jobs_inserted();
    CREATE TRIGGER chaos_job_changed AFTER UPDATE ON jobs_job REFERENCING OLD TABLE AS before NEW TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION chaos_record_jobs_changed();
    TRUNCATE chaos_job_history;
"""

REMOVE = """
    DROP TRIGGER IF EXISTS chaos_job_inserted ON jobs_job;
    DROP TRIGGER IF EXISTS chaos_job_changed ON jobs_job;
    DROP TABLE IF EXISTS chaos_job_history;
    DROP FUNCTION IF EXISTS chaos_record_jobs_inserted();
    DROP FUNCTION IF EXISTS chaos_record_jobs_changed();
"""


def install(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(INSTALL)


def remove(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(REMOVE)


@dataclass(frozen=True)
class Change:
    """One change of one job's row: the row as the change left it, and its status and attempt before."""

    job: str
    at: float  # the database's clock_timestamp() during the change
    old_status: str | None  # None: the insert
    status: str
    old_attempt: int | None
    attempt: int
    worker: str
    app: str  # the writing session's application_name: which process wrote it
    run_at: float | None = None
    failed_at: float | None = None
    retry_delay: float | None = None
    lease_end: float | None = None
    created_at: float | None = None
    completed_at: float | None = None
    error: str = ""
    started_at: float | None = None

    @property
    def kind(self) -> str:
        """insert, claim, hand-back, rescue, fail, complete, or other (an operator's retry, a cancel, ...)."""
        if self.old_status is None:
            return "insert"
        if self.old_status != "running" and self.status == "running":
            return "claim"
        if self.old_status == "running" and self.status not in ("running", "cancelled"):
            if self.status == "completed":
                return "complete"
            if self.status == "pending" and self.old_attempt is not None and self.attempt == self.old_attempt - 1:
                return "hand-back"
            if self.error.startswith("LeaseExpired"):
                return "rescue"
            return "fail"
        return "other"


def read(url: str, job_ids: Sequence[object]) -> dict[str, list[Change]]:
    """Each job's changes in the order they were made (a job's changes are serialised by its row lock)."""
    found: dict[str, list[Change]] = defaultdict(list)
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            """
            SELECT job_id, extract(epoch FROM at)::float8, old_status, status, old_attempt, attempt, worker_id, app,
                   extract(epoch FROM run_at)::float8, extract(epoch FROM failed_at)::float8, retry_delay,
                   extract(epoch FROM lease_expires_at)::float8, extract(epoch FROM created_at)::float8,
                   extract(epoch FROM completed_at)::float8, coalesce(error, ''),
                   extract(epoch FROM started_at)::float8
            FROM chaos_job_history WHERE job_id = ANY(%s::uuid[]) ORDER BY id
            """,
            [[str(i) for i in job_ids]],
        ).fetchall()
    for row in rows:
        found[str(row[0])].append(Change(str(row[0]), *row[1:]))
    return dict(found)
