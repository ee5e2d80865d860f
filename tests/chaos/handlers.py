"""The chaos suite's handler: it writes down each attempt's life, from the database's view, for the invariants.

`chaos.work` appends a `start` line (the job, the attempt, the worker, the database's clock and the lease it
holds, read from the job's own row) and an `end` line when it returns. With `once` the work is exactly-once:
one row in `chaos_effect` committed in the same transaction as the job's completion (`mark_completed`), so a
worker that lost its lease cannot commit it and a job can never have two. Without `once` it is at-least-once:
the `end` line is the delivery, and a job may deliver again only on a later attempt.
"""

from __future__ import annotations

import os
import time
from typing import Any

from django.db import connection, transaction

from jobs.application.context import JobContext
from jobs.application.registry import job_handler
from kernel.failures import ServerFailure
from tests.support.handlers import _record

EFFECT_TABLE = """
    CREATE TABLE IF NOT EXISTS chaos_effect (
        job_id uuid NOT NULL, attempt integer NOT NULL, worker text NOT NULL,
        at timestamptz NOT NULL DEFAULT clock_timestamp()
    )
"""  # no unique constraint: a second effect must be seen, not refused


@job_handler("chaos.work")
def work(payload: dict[str, Any], job: JobContext) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8,"
            " extract(epoch FROM lease_expires_at)::float8, worker_id FROM jobs_job WHERE id = %s",
            [job.id],
        )
        row = cursor.fetchone()
    db_start, lease_end, row_worker = (float(row[0]), float(row[1]) if row[1] else None, row[2]) if row else (0, 0, "")
    host_start = time.time()
    offset = db_start - host_start  # this host's clock against the database's (a skewed host: about -120 s)
    _record(
        payload["path"],
        event="start",
        job=str(job.id),
        attempt=job.attempt_number,
        worker=job.worker_id,
        row_worker=row_worker,
        pid=os.getpid(),
        db_start=db_start,
        lease_end=lease_end,
        tag=payload.get("tag"),
        scheduled_for=payload.get("scheduled_for"),
    )

    def end(outcome: str, **extra: Any) -> None:
        finished = time.time()  # this host's clock, as the worker's acknowledgement writes completed_at
        _record(
            payload["path"],
            event="end",
            outcome=outcome,
            job=str(job.id),
            attempt=job.attempt_number,
            worker=job.worker_id,
            pid=os.getpid(),
            db_end=finished + offset,
            finished=finished,
            **extra,
        )

    try:
        _attempt(payload, job)
    except BaseException as exc:  # the attempt ended here (a failure, a cut connection, LeaseLost): not live
        end("failed", error=type(exc).__name__)
        raise
    end("done", tag=payload.get("tag"))


def _attempt(payload: dict[str, Any], job: JobContext) -> None:
    if payload.get("sleep"):  # not sleep(0): under libfaketime that fails with EINVAL
        time.sleep(payload["sleep"])
    if payload.get("fail_first") and job.attempt_number == 1:
        raise ServerFailure("the first attempt fails on purpose")
    if payload.get("once"):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO chaos_effect (job_id, attempt, worker) VALUES (%s, %s, %s)",
                    [job.id, job.attempt_number, job.worker_id],
                )
            job.mark_completed()
