"""The workflow engine's jobs on the queue. Registered by name; the queue knows nothing of workflows."""

from collections.abc import Sequence
from typing import Any

from jobs.application.context import JobContext
from jobs.application.registry import BatchItem, DeadLetter, batch_handler, job_handler, on_dead_letter
from workflows.application import enrollments  # noqa: F401 - registers workflows.enroll_contacts
from workflows.application.runs.batches import run_steps
from workflows.application.runs.moves import RESUME_HANDLER, STEP_HANDLER
from workflows.application.runs.operating import job_died, reconcile_stranded
from workflows.application.runs.stepping import end_wait, run_step

RECONCILE_HANDLER = "workflows.reconcile"


@job_handler(STEP_HANDLER)
def workflow_step(payload: dict[str, Any], job: JobContext) -> None:
    """One attempt of a run's current step; it records itself and queues what follows."""
    run_step(
        execution_id=payload["execution_id"],
        step_index=int(payload["step_index"]),
        version_id=payload.get("version_id"),
        job=job,
    )


@batch_handler(STEP_HANDLER)
def workflow_steps(items: Sequence[BatchItem]) -> list[BatchItem]:
    """Several runs' internal steps claimed together, in one transaction; the rest go one by one."""
    return run_steps(items)


@job_handler(RESUME_HANDLER)
def workflow_resume(payload: dict[str, Any], job: JobContext) -> None:
    """A wait step's time has come: the run goes on."""
    end_wait(execution_id=payload["execution_id"], job=job)


@on_dead_letter(STEP_HANDLER)
@on_dead_letter(RESUME_HANDLER)
def workflow_job_died(letter: DeadLetter) -> None:
    """The queue gave up on a step or resume job: its run must not stay QUEUED/ACTIVE/WAITING forever."""
    job_died(
        execution_id=letter.payload.get("execution_id", ""),
        job_id=letter.id,
        handler=letter.handler,
        status=letter.status,
        error=letter.error,
    )


@job_handler(RECONCILE_HANDLER)
def workflow_reconcile(payload: dict[str, Any], job: JobContext) -> None:
    """Every few minutes (a built-in schedule): fail the runs whose job will never run."""
    reconcile_stranded(grace_seconds=float(payload.get("grace_seconds", 300)))
