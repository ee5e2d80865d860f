"""The workflow engine's jobs on the queue. Registered by name; the queue knows nothing of workflows."""

from typing import Any

from jobs.application.context import JobContext
from jobs.application.registry import job_handler
from workflows.application.executions import RESUME_HANDLER, STEP_HANDLER, ExecutionService


@job_handler(STEP_HANDLER)
def workflow_step(payload: dict[str, Any], job: JobContext) -> None:
    """One attempt of a run's current step; it records itself and queues what follows."""
    ExecutionService().run_step(
        execution_id=payload["execution_id"],
        step_index=int(payload["step_index"]),
        version_id=payload.get("version_id"),
        job=job,
    )


@job_handler(RESUME_HANDLER)
def workflow_resume(payload: dict[str, Any], job: JobContext) -> None:
    """A wait step's time has come: the run goes on."""
    ExecutionService().end_wait(execution_id=payload["execution_id"], job=job)
