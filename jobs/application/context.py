"""What a running handler knows about its job."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn
from uuid import UUID

from jobs.domain.snooze import JobSnooze
from kernel.failures import LeaseLost

if TYPE_CHECKING:
    from jobs.application.queue import JobSpec
    from jobs.infrastructure.store import ClaimedJob, JobStore


@dataclass
class JobContext:
    id: UUID
    handler: str
    queue: str
    attempt_number: int  # 1 on the first attempt
    max_attempts: int
    account_id: int | None
    worker_id: str
    started: float  # epoch seconds
    _store: JobStore = field(repr=False)
    completed_in_transaction: bool = False

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt_number >= self.max_attempts

    def mark_completed(self, *, then: Sequence[JobSpec] = ()) -> list[UUID]:
        """Mark this job completed inside the caller's open transaction, and queue `then` with it.

        The completion then commits or rolls back with the handler's own
        writes: a worker that crashes after the commit cannot run the job
        again, and a worker that lost its lease cannot commit (LeaseLost
        rolls the transaction back). Jobs in `then` (what follows this one)
        are queued by the same statement; their ids are returned in order.
        """
        from jobs.application.outbox import outbox_for_caller, put
        from jobs.application.queue import prepare_job
        from jobs.infrastructure.store import Finished

        rows = [prepare_job(spec) for spec in then]
        outbox = outbox_for_caller()
        if outbox is not None:
            # The handler's transaction is on another database than the queue's: what follows goes to that
            # database's outbox with it, and this job is completed on the queue's database just after that
            # transaction commits. A worker that dies in between runs the job again: its handler must see
            # that (the workflow engine does: the run names the next job, not this one).
            if not self._store.holds(self.worker_id, self.id, self.attempt_number):
                raise LeaseLost(f"job {self.id} attempt {self.attempt_number} is no longer held by {self.worker_id}")
            put(outbox, rows)
            complete_after_commit(outbox, [self])
            return [row.id for row in rows]
        done = Finished(self.id, self.attempt_number, self.started, time.time())
        acked, holders = self._store.complete_and_insert(self.worker_id, done, rows)
        if not acked:
            raise LeaseLost(f"job {self.id} attempt {self.attempt_number} is no longer held by {self.worker_id}")
        # Only once the completion is committed; if the transaction rolls back, the worker acknowledges.
        self._store.connection.on_commit(self._completed)
        return [holders[row.id] for row in rows]

    def keep_result(self, result: dict[str, Any]) -> None:
        """Store what this attempt decided with the job (`Job.result`, on its admin page), at once: a handler
        that completes without doing its work says so there, and why (`{"skipped": "unsubscribed", ...}`).
        Written only while this worker holds the job."""
        from jobs.infrastructure.database import queue_database
        from jobs.infrastructure.models import Job

        Job.objects.using(queue_database()).filter(pk=self.id, worker_id=self.worker_id).update(result=result)

    def snooze(self, seconds: float, reason: str = "") -> NoReturn:
        """Put this job back until `seconds` from now (the database's clock), uncounted: not an attempt, so
        `max_attempts` is not used up, and counted in `Job.snoozes` and `/metrics` instead. Raises `JobSnooze`,
        which the worker catches: nothing after this call runs, and an open transaction of the handler's is
        rolled back with it (commit first what must be kept)."""
        raise JobSnooze(seconds, reason)

    def _completed(self) -> None:
        self.completed_in_transaction = True


def context_for(job: ClaimedJob, store: JobStore, worker_id: str, started: float | None = None) -> JobContext:
    """What a handler is told about a job its worker claimed; `store` is on the handler's connection."""
    return JobContext(
        id=job.id,
        handler=job.handler,
        queue=job.queue,
        attempt_number=job.attempt_number,
        max_attempts=job.max_attempts,
        account_id=job.account_id,
        worker_id=worker_id,
        started=time.time() if started is None else started,
        _store=store,
    )


def complete_all(jobs: Sequence[JobContext], then: Sequence[JobSpec | None]) -> list[UUID | None]:
    """`mark_completed` for several jobs of one batch handler, in one statement: job i is completed and
    `then[i]` (if any) queued; returns the queued jobs' ids in order.

    All or nothing: if any of the jobs is no longer held by this worker, nothing is queued and LeaseLost
    is raised, so the caller's transaction rolls back and the worker runs the jobs one by one.
    """
    from jobs.application.outbox import outbox_for_caller, put
    from jobs.application.queue import prepare_job
    from jobs.infrastructure.store import Finished

    if not jobs:
        return []
    store = jobs[0]._store
    outbox = outbox_for_caller()
    if outbox is not None:  # as in mark_completed: the followers by the outbox, the completions by the worker
        held = [job for job in jobs if store.holds(job.worker_id, job.id, job.attempt_number)]
        if len(held) != len(jobs):
            lost = frozenset(job.id for job in jobs if job not in held)
            raise LeaseLost(f"jobs {', '.join(sorted(map(str, lost)))} are no longer held by {jobs[0].worker_id}", lost)
        followers = [prepare_job(spec) if spec is not None else None for spec in then]
        put(outbox, [row for row in followers if row is not None])
        complete_after_commit(outbox, jobs)
        return [row.id if row is not None else None for row in followers]
    now = time.time()
    done = [Finished(job.id, job.attempt_number, job.started, now) for job in jobs]
    rows = [prepare_job(spec) if spec is not None else None for spec in then]
    acked, holders = store.complete_many_and_insert(jobs[0].worker_id, done, [row for row in rows if row])
    if len(acked) != len(jobs):
        lost = frozenset(job.id for job in jobs if job.id not in acked)
        raise LeaseLost(f"jobs {', '.join(sorted(map(str, lost)))} are no longer held by {jobs[0].worker_id}", lost)
    for job in jobs:
        store.connection.on_commit(job._completed)
    return [holders[row.id] if row is not None else None for row in rows]


def complete_after_commit(alias: str, jobs: Sequence[JobContext]) -> None:
    """Once the handler's transaction on `alias` commits, complete these jobs on the queue's database (one
    statement, the worker's compare-and-set). What it could not write (a lost lease, the queue unreachable)
    is logged and left to the worker's ordinary acknowledgement."""
    from django.db import transaction

    from jobs.infrastructure.store import Finished

    def complete() -> None:
        now = time.time()
        store = jobs[0]._store
        acked = store.complete(jobs[0].worker_id, [Finished(j.id, j.attempt_number, j.started, now) for j in jobs])
        for job in jobs:
            if job.id in acked:
                job.completed_in_transaction = True

    transaction.on_commit(complete, using=alias, robust=True)
