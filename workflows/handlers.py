"""The workflow engine's jobs on the queue. Registered by name; the queue knows nothing of workflows."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings

from jobs.public.handlers import (
    BatchItem,
    DeadLetter,
    JobContext,
    batch_handler,
    job_handler,
    on_dead_letter,
    require,
    require_uuid,
)
from workflows.application import enrollments  # noqa: F401 - registers workflows.enroll_contacts
from workflows.application.runs.batches import run_steps
from workflows.application.runs.goals import GOAL_HANDLER, goal_met
from workflows.application.runs.moves import RESUME_HANDLER, STEP_HANDLER
from workflows.application.runs.operating import job_died, reconcile_stranded
from workflows.application.runs.stepping import end_wait, run_step
from workflows.application.runs.waiting import EVENT_HANDLER, event_arrived
from workflows.application.scheduled_hooks import (
    DELIVERY_HANDLER,
    HOOK_HANDLER,
    PURGE_RUNS_HANDLER,
    deliver_hook_webhook,
    hook_delivery_ended,
    hook_runs_purge,
    run_hook,
)

RECONCILE_HANDLER = "workflows.reconcile"


@job_handler(STEP_HANDLER)
def workflow_step(payload: dict[str, Any], job: JobContext) -> None:
    """One attempt of a run's current step; it records itself and queues what follows."""
    run_step(
        execution_id=require_uuid(payload, "execution_id"),
        step_index=require(payload, "step_index", int),
        version_id=require_uuid(payload, "version_id", optional=True),
        job=job,
    )


@batch_handler(STEP_HANDLER)
def workflow_steps(items: Sequence[BatchItem]) -> list[BatchItem]:
    """Several runs' internal steps claimed together, in one transaction; the rest go one by one."""
    return run_steps(items)


@job_handler(RESUME_HANDLER)
def workflow_resume(payload: dict[str, Any], job: JobContext) -> None:
    """A wait step's time has come: the run goes on."""
    end_wait(execution_id=require_uuid(payload, "execution_id"), job=job)


@job_handler(EVENT_HANDLER)
def workflow_event(payload: dict[str, Any], job: JobContext) -> None:
    """An event a waiting run waited for was recorded on its wait: the run goes on (unless it is paused)."""
    event_arrived(execution_id=require_uuid(payload, "execution_id"), job=job)


@job_handler(GOAL_HANDLER)
def workflow_goal(payload: dict[str, Any], job: JobContext) -> None:
    """The run's contact met a goal: the run ends (or jumps), unless a step in flight will see to it."""
    goal_met(execution_id=require_uuid(payload, "execution_id"), job=job)


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


@job_handler(HOOK_HANDLER)
def scheduled_hook(payload: dict[str, Any], job: JobContext) -> None:
    """One tick of a scheduled hook (its jobs Schedule queued it): start runs, post an event, or a webhook."""
    run_hook(
        hook_id=require(payload, "hook", int),
        tick=datetime.fromisoformat(require(payload, "scheduled_for", str)),
        missed_ticks=require(payload, "missed_ticks", int, optional=True) or 0,
        job_id=job.id,
    )


@job_handler(DELIVERY_HANDLER)
def scheduled_hook_delivery(payload: dict[str, Any], job: JobContext) -> None:
    """A deliver_webhook tick's webhook: one attempt, its outcome on the tick's record."""
    deliver_hook_webhook(
        hook_id=require(payload, "hook", int),
        tick=datetime.fromisoformat(require(payload, "scheduled_for", str)),
        job_id=job.id,
    )


@on_dead_letter(DELIVERY_HANDLER)
def scheduled_hook_delivery_ended(letter: DeadLetter) -> None:
    """The queue gave up on a tick's webhook: the tick failed, with the stored error."""
    hook, tick = letter.payload.get("hook"), letter.payload.get("scheduled_for")
    if isinstance(hook, int) and isinstance(tick, str):
        hook_delivery_ended(hook_id=hook, tick=datetime.fromisoformat(tick), error=letter.error)


@job_handler(PURGE_RUNS_HANDLER)
def purge_hook_runs(payload: dict[str, Any], job: JobContext) -> None:
    """Daily (a built-in schedule): forget hook run records past SCHEDULED_HOOK_RUN_RETENTION_DAYS."""
    hook_runs_purge(older_than_days=float(settings.SCHEDULED_HOOK_RUN_RETENTION_DAYS))
