"""A run's moves on the queue: the one job that may move a run, and the job each next move needs.

The entity (`workflows.domain.execution.Execution`) decides every move and
returns a NextMove; this module turns it into a job on the queue, in the
caller's transaction, and remembers that job on the run (`next_job_id`):
only that job may move the run next. Every use case that moves a run
(starting, stepping, operating) enacts its move here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings

from jobs.public import JobContext, JobSpec, enqueue
from jobs.public.operations import cancel_pending_jobs
from workflows.application.errors import ExecutionNotFound
from workflows.domain.execution import Execution, MoveKind, NextMove
from workflows.infrastructure.store import RunRow

STEP_HANDLER = "workflow_step"
RESUME_HANDLER = "workflow_resume"


def enact(row: RunRow, run: Execution, move: NextMove, completing: JobContext | None = None) -> None:
    """Put the run's next move on the queue, in the caller's transaction; remember its job.

    `completing`: the step's own job, marked completed by the same statement that queues what follows.
    """
    spec = next_job(row, run, move)
    if completing is not None:
        next_ids = completing.mark_completed(then=[spec] if spec else [])
    elif spec is not None:
        next_ids = [enqueue(spec.handler, spec.payload, queue=spec.queue, run_at=spec.run_at, account=spec.account).id]
    else:
        next_ids = []
    remember_next_job(row, move, next_ids[0] if spec is not None else None)


def next_job(row: RunRow, run: Execution, move: NextMove) -> JobSpec | None:
    """The job that carries out the run's next move, if it needs one."""
    spec = None
    if move.kind is MoveKind.RUN_STEP:
        spec = step_job(row, run.current_step_index, at=move.at)
    elif move.kind is MoveKind.END_WAIT:
        spec = JobSpec(
            RESUME_HANDLER,
            {"execution_id": str(row.id)},
            queue=settings.WORKFLOW_QUEUE,
            run_at=move.at,
            account=row.account_id,
        )
    return spec


def step_job(row: RunRow, step_index: int, *, at: datetime | None = None) -> JobSpec:
    """The `workflow_step` job that carries out the run's step at `step_index` (at once, or at `at`)."""
    return JobSpec(
        STEP_HANDLER, step_payload(row, step_index), queue=settings.WORKFLOW_QUEUE, run_at=at, account=row.account_id
    )


def step_payload(row: RunRow, step_index: int) -> dict[str, Any]:
    # The version lets the job pick its path (external or internal action) before reading the run.
    return {"execution_id": str(row.id), "step_index": step_index, "version_id": str(row.version_id)}


def holds(row: RunRow, job: JobContext, step_index: int | None) -> bool:
    """Is this job the one allowed to move the run (and at this step)? Else it is stale or a duplicate."""
    if row.next_job_id != job.id:
        return False
    return step_index is None or row.current_step_index == step_index


def remember_next_job(row: RunRow, move: NextMove, job_id: UUID | None) -> None:
    """The run names the job that may move it next (none once it has nothing left to do)."""
    if job_id is not None:
        row.next_job_id = job_id
    elif move.kind is MoveKind.NOTHING:
        row.next_job_id = None


def cancel_next_job(row: RunRow) -> None:
    if row.next_job_id is not None:
        cancel_pending_jobs(ids=[row.next_job_id])
        row.next_job_id = None


def run_id(execution_id: UUID | str) -> UUID:
    """A run's id from what a caller gave; anything that is no UUID names no run."""
    try:
        return execution_id if isinstance(execution_id, UUID) else UUID(str(execution_id))
    except ValueError:
        raise ExecutionNotFound(execution_id) from None
