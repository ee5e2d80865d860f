"""Operating runs: an operator pauses, resumes, cancels or retries one; the queue reports a job it gave up on.

Pause, resume, cancel and retry lock the run, let the entity decide the
move (an illegal one raises IllegalExecutionTransition, HTTP 409) and enact
it on the queue in the same transaction. The API's and the admin's actions
call these same functions (`RUN_OPERATIONS`).

A step or resume job that ends dead or failed on the queue (its handler
raised every time, or its worker died on the last attempt) fails its run
(`job_died`, the queue's dead-letter hook), and a sweep catches what the
hook could not settle (`reconcile_stranded`): no run waits forever for a
job that will never come.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction

from jobs.public.operations import cancel_pending_jobs
from kernel.failures import truncate
from workflows.application.definitions import load_version
from workflows.application.errors import ExecutionNotFound
from workflows.application.runs.history import decision_row
from workflows.application.runs.moves import cancel_next_job, enact, run_id
from workflows.application.runs.waiting import has_recorded_event, waiting_step
from workflows.domain.execution import MAX_STEP_VISITS, Execution, ExecutionStatus
from workflows.infrastructure.models import WorkflowExecution
from workflows.infrastructure.store import RunRow, RunStore
from workflows.infrastructure.waits import WaitStore

log = logging.getLogger("relay.workflows")

JOB_DIED_LOCK_WAIT_SECONDS = 5.0


def pause_run(*, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
    """Stop the run where it is: its queued job is cancelled; a step in flight still finishes and is logged."""

    def pause(row: RunRow, run: Execution, now: datetime) -> None:
        run.pause(now)
        if run.paused_from is not ExecutionStatus.ACTIVE:
            cancel_next_job(row)

    return _operate(execution_id, account_id, pause)


def resume_run(*, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
    """Carry on: a wait whose time passed during the pause continues at once, else waits the remainder; an
    event wait whose event came during the pause goes on at once, on its "happened" path."""

    def resume(row: RunRow, run: Execution, now: datetime) -> None:
        if run.paused_from is ExecutionStatus.WAITING and waiting_step(row) is not None and has_recorded_event(row.id):
            run.resume_at = now  # the event came during the pause: act on it now (the wait step resolves it)
        enact(row, run, run.resume(now))

    return _operate(execution_id, account_id, resume)


def cancel_run(*, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
    """Stop the run for good; its queued job is cancelled and it never runs another step."""

    def cancel(row: RunRow, run: Execution, now: datetime) -> None:
        in_flight = run.status is ExecutionStatus.ACTIVE or run.paused_from is ExecutionStatus.ACTIVE
        run.cancel(now)
        if not in_flight:  # a step in flight keeps its job, so its outcome is still logged
            cancel_next_job(row)
        WaitStore().forget(row.id)  # an event wait, if any, leaves the index

    return _operate(execution_id, account_id, cancel)


@dataclass(frozen=True)
class Operator:
    """Who moved a run by hand, as its history records them: a person in the admin, or an API token's user.

    An API token is named by its prefix (what the token lists show), never by the token; the keys avoid the
    words the redaction rule masks (`token`, `secret` ...), so the record reads the same everywhere it shows.
    """

    user_id: int | None
    via: str  # "admin" or "api"
    name: str = ""  # the admin user's username
    prefix: str = ""  # the API token's prefix

    def as_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"user_id": self.user_id, "via": self.via}
        if self.name:
            shown["name"] = self.name
        if self.prefix:
            shown["prefix"] = self.prefix
        return shown


def retry_run(
    *, execution_id: UUID | str, account_id: int | None = None, by: Operator | None = None
) -> WorkflowExecution:
    """A FAILED run starts again from the step that failed, with fresh attempts.

    A run the loop cap failed goes on from the step it was capped at, with a fresh allowance of steps
    (`Execution.retry`); its history gets a row saying who lifted the cap, when, and after how many steps.
    """

    def retry(row: RunRow, run: Execution, now: datetime) -> None:
        capped, counted = run.loop_capped, run.steps_counted
        enact(row, run, run.retry(now))
        if capped:
            RunStore().insert_log(**_cap_lifted(row, by, counted, now))
            log.info("run %s: loop cap lifted by %s after %s steps", row.id, by.as_dict() if by else "?", counted)

    return _operate(execution_id, account_id, retry)


def _cap_lifted(row: RunRow, by: Operator | None, counted: int, now: datetime) -> dict[str, Any]:
    """The history's row for a retry that lifted the loop cap, at the step the run goes on from."""
    steps = load_version(row.version_id).definition.steps
    step = steps[min(row.current_step_index, len(steps) - 1)]
    decision = {
        "kind": "retry",
        "by": by.as_dict() if by is not None else {"user_id": None, "via": "unknown"},
        "at": now.isoformat(),
        "loop_cap_reset": {"steps_before": counted, "allowance": MAX_STEP_VISITS},
        "next": step.key,
    }
    # "skipped": not an attempt of the step; the step itself runs next, with fresh attempts
    return decision_row(row.id, step, outcome="skipped", at=now, response={}, decision=decision)


# What an operator may do to a run, by the name the API's and the admin's actions use.
RUN_OPERATIONS: dict[str, Callable[..., WorkflowExecution]] = {
    "pause": pause_run,
    "resume": resume_run,
    "cancel": cancel_run,
    "retry": retry_run,
}


def _operate(
    execution_id: UUID | str, account_id: int | None, change: Callable[[RunRow, Execution, datetime], None]
) -> WorkflowExecution:
    """Lock the run and let `change` move it, with the database's now (read with the lock)."""
    store = RunStore()
    pk = run_id(execution_id)
    with transaction.atomic(durable=True):
        row = store.lock_run(pk)
        if row is None or (account_id is not None and row.account_id != account_id):
            raise ExecutionNotFound(execution_id)
        run = row.to_domain()
        change(row, run, store.now())
        store.update_run(row, [*row.apply(run), "next_job_id"])
    return WorkflowExecution.objects.get(pk=pk)


def job_died(*, execution_id: UUID | str, job_id: UUID, handler: str, status: str, error: str) -> bool:
    """The queue gave up on a job of this run (dead or failed): if it still held the run, the run fails.

    Called by the queue's dead-letter hook. A job that no longer held the run (stale, duplicate)
    changes nothing. True when the run was failed.
    """
    store = RunStore()
    with transaction.atomic(durable=True):
        # Called on an executor or the maintenance thread: never stall them behind a long lock holder
        # (the hook's failure is logged; the run is then settled by an operator's retry).
        store.limit_lock_wait(JOB_DIED_LOCK_WAIT_SECONDS)
        try:
            row = store.lock_run(run_id(execution_id))
        except ExecutionNotFound:
            return False
        if row is None or row.next_job_id != job_id:
            return False
        if not store.job_gave_up(job_id):  # an operator retried it meanwhile: it will move the run
            return False
        run = row.to_domain()
        message = truncate(f"StepJobDied: the {handler} job {job_id} ended {status}: {error}")
        if not run.job_lost(store.now(), error=message, category="unknown"):
            return False
        row.next_job_id = None
        store.update_run(row, [*row.apply(run), "next_job_id"])
        WaitStore().forget(row.id)
    log.error("run %s failed: %s", row.id, message)
    return True


def reconcile_stranded(*, grace_seconds: float = 300.0, limit: int = 500) -> int:
    """Fail the runs whose job will never run (see RunStore.stranded_runs); returns how many.

    The sweep behind the dead-letter hook: it catches what the hook could not settle (the database away
    at that moment, a lock held too long), jobs an operator cancelled, and jobs purged since.
    """
    store = RunStore()
    older_than = store.now() - timedelta(seconds=grace_seconds)  # runs' updated_at is the database's clock
    failed = 0
    for stranded_id, job_id, handler, status, error in store.stranded_runs(older_than=older_than, limit=limit):
        try:
            failed += job_died(
                execution_id=stranded_id,
                job_id=job_id,
                handler=handler or "workflow",
                status="gone (purged)" if status == "missing" else status,
                error=error or "no error was recorded",
            )
        except Exception as exc:  # one run's lock held too long must not stop the sweep for the others
            log.warning("run %s: could not be settled now (%s); the next sweep tries again", stranded_id, exc)
    return failed


def cancel_jobs_of_contact(*, contact_id: int) -> int:
    """The contact is being deleted (its runs and logs go with it): cancel the jobs its runs had queued.

    Called inside the deleting transaction; returns how many jobs were cancelled. A step in flight
    finds its run gone and does nothing.
    """
    job_ids = RunStore().next_jobs_of_contact(contact_id)
    return cancel_pending_jobs(ids=job_ids) if job_ids else 0
