"""Jobs claimed by a test as a worker claims them."""

from __future__ import annotations

import time

from jobs.application.context import JobContext
from jobs.infrastructure.store import ClaimedJob, JobStore


def context_for(job: ClaimedJob, store: JobStore, worker_id: str) -> JobContext:
    """The JobContext a worker gives a handler for a job it claimed."""
    return JobContext(
        id=job.id,
        handler=job.handler,
        queue=job.queue,
        attempt_number=job.attempt_number,
        max_attempts=job.max_attempts,
        account_id=job.account_id,
        worker_id=worker_id,
        started=time.time(),
        _store=store,
    )
