"""Carrying out a run's step, one attempt (`run_step`, the `workflow_step` job), and the end of a wait (`end_wait`).

1. Only the job the run names (`next_job_id`) may move it, and only at its
   current step: a stale or duplicate job does nothing. A paused run lets go
   of the step; resume queues it again.
2. Internal actions (wait, update_contact, add_tag, remove_tag) run inside
   the transaction that locks the run, so the change, the log row, the run's
   move, the next job and this job's completion commit together: exactly
   once. (The contacts service an action calls is its own atomic block: the
   savepoint that undoes a failed change, leaving the transaction usable to
   record the failure.)
3. External actions (email, SMS, voice, webhook) cannot be rolled back: the
   run is marked ACTIVE and committed first (a compare-and-set on what was
   read), the action runs outside any transaction, then one transaction locks
   the run again, writes the log row, moves the run, queues the next job (the
   next step, a retry at its backoff, or nothing if the run was paused or
   cancelled meanwhile) and marks this job completed. A crash between the
   action and that commit re-runs the action: at-least-once towards the
   outside world; the webhook id is stable per run and step, so receivers can
   drop the duplicate. If the database refuses that record (data it cannot
   hold), the step is recorded FAILED without the refused data instead.

From claim to log row: `run_step` -> `carry_out` (the action) -> `record` (in
the locked transaction: `settle` says the run's move and the log row, then
`moves.enact` queues the next job and completes this one) -> one statement
writes the run and its log row. Steps claimed together take the same path
in `batches`. Reads and writes of runs here are plain SQL
(workflows.infrastructure.store).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction

from integrations.domain.channels import failure_details
from jobs.public.handlers import JobContext, RetryPolicy
from kernel.failures import format_error
from workflows.application.actions import ActionExecutor, ActionResult, StepRun, executor_for
from workflows.application.chain import caused_by
from workflows.application.definitions import LoadedVersion, load_version
from workflows.application.errors import ExecutionNotFound
from workflows.application.runs.goals import pending_goal, reach_goal
from workflows.application.runs.moves import enact, holds, run_id
from workflows.application.runs.waiting import wait_timed_out, waiting_step
from workflows.domain.enrollment import ChainOrigin
from workflows.domain.errors import OutcomeNotStored
from workflows.domain.execution import ENDED, Execution, ExecutionStatus, NextMove, StepGate, StepOutcome
from workflows.domain.logs import bounded_output, bounded_response
from workflows.domain.retry import RetryService
from workflows.domain.workflow import Step
from workflows.infrastructure.models import WorkflowVersion
from workflows.infrastructure.store import RunRow, RunStore
from workflows.infrastructure.templates import renderer

log = logging.getLogger("relay.workflows")


@dataclass(frozen=True)
class Attempt:
    """What one attempt of a step came to: the action's result, or the error it raised."""

    result: ActionResult | None
    error: BaseException | None
    duration_ms: int


@dataclass(frozen=True)
class _Begun:
    """An external step marked ACTIVE and committed: its action may now run, outside any transaction."""

    row: RunRow
    contact: dict[str, Any]
    version: LoadedVersion
    step: Step
    attempt_number: int
    now: datetime  # when it began, by the database's clock


def run_step(
    *, execution_id: UUID | str, step_index: int, job: JobContext, version_id: UUID | str | None = None
) -> None:
    """Carry out the run's current step (one attempt); see the module docstring for the transactions.

    Its `now` is the database's, read with the run (`RunStore.read_at`): the step's start, a wait's end and
    a retry's due time are on the database's clock, whatever the worker host's clock says.
    """
    store = RunStore()
    execution_id = run_id(execution_id)
    begun = None
    if version_id is not None and is_external(version_id, step_index):
        # Fast path for an external action: read without a lock, then mark the run ACTIVE by
        # compare-and-set on what was read (one statement, committed before the outside world is
        # touched). Anything unusual (paused, cancelled, raced, stale) takes the locked path below.
        found = store.read_run_with_contact(execution_id)
        if found is None or not holds(found[0], job, step_index):
            return  # a stale or duplicate job (or the run was erased): nothing to do
        begun = _begin_external(store, *found, job, store.now())
    if begun is None:
        begun = _begin_locked(store, execution_id, step_index, job)
        if begun is None:
            return  # nothing to do, or an internal step: done and recorded in that transaction
    row, contact, version, step = begun.row, begun.contact, begun.version, begun.step
    outcome = carry_out(executor_for(step.action_type), step_run(row, contact, version, step, begun.now), row, version)
    record_external(store, row, step, begun.attempt_number, outcome, begun.now, job)


def _begin_external(
    store: RunStore, row: RunRow, contact: dict[str, Any], job: JobContext, now: datetime
) -> _Begun | None:
    """Mark the run ACTIVE by compare-and-set on the row read without a lock; None if that does not apply."""
    run = row.to_domain()
    if run.step_job_arrived() is not StepGate.RUN:
        return None
    if load_version(row.version_id).definition.goals:
        return None  # a goal may have been met: the locked path looks before the step starts
    read_status, attempt_number = row.status, run.attempt_number
    run.begin_step(now)
    if not store.compare_and_set(row, row.apply(run), expected_status=read_status, job_id=job.id):
        return None
    version = load_version(row.version_id)
    return _Begun(row, contact, version, version.definition.steps[row.current_step_index], attempt_number, now)


def _begin_locked(store: RunStore, execution_id: UUID, step_index: int, job: JobContext) -> _Begun | None:
    """Lock the run: a stale job does nothing, a paused run lets go of the step, an internal step is carried
    out and recorded right here. An external step is marked ACTIVE and returned, committed."""
    with transaction.atomic(durable=True):
        found = store.lock_run_with_contact(execution_id)
        if found is None or not holds(found[0], job, step_index):
            return None
        row, contact = found
        now = store.now()  # read with the run
        run = row.to_domain()
        gate = run.step_job_arrived()
        if gate is StepGate.IGNORE:
            return None
        if gate is StepGate.RELEASE:
            run.release_step()
            row.next_job_id = None
            store.update_run(row, [*row.apply(run), "next_job_id"])
            job.mark_completed()
            return None
        version = load_version(row.version_id)
        goal = pending_goal(row, version)
        if goal is not None:  # met before this step started: the step does not start
            move, goal_log = reach_goal(row, run, version, goal, now)
            enact(row, run, move, completing=job)
            store.record_step(row, [*row.apply(run), "next_job_id"], goal_log)
            return None
        step = version.definition.steps[row.current_step_index]
        executor = executor_for(step.action_type)
        attempt_number = run.attempt_number
        run.begin_step(now)
        if not executor.external:
            # Internal actions change only Relay's tables: inside this transaction, exactly once.
            outcome = carry_out(executor, step_run(row, contact, version, step, now), row, version)
            record(store, row, run, step, attempt_number, outcome, now, job)
            return None
        store.update_run(row, row.apply(run))  # ACTIVE is committed before the outside world is touched
    return _Begun(row, contact, version, step, attempt_number, now)


def end_wait(*, execution_id: UUID | str, job: JobContext) -> None:
    """resume_at came: the run goes on with its next step (or completes, if the wait was the last); for a
    wait_for_event step, its timeout came (`runs.waiting`)."""
    store = RunStore()
    with transaction.atomic(durable=True):
        row = store.lock_run(run_id(execution_id))
        if row is None or not holds(row, job, None):
            return
        if row.status == ExecutionStatus.WAITING.value:
            step = waiting_step(row)
            if step is not None and wait_timed_out(row, step, job, store.now()):
                return  # a wait_for_event's timeout (or the event that beat it): settled there
        run = row.to_domain()
        move = run.wait_over(store.now())
        if move is None:
            return
        enact(row, run, move, completing=job)
        store.update_run(row, [*row.apply(run), "next_job_id"])


# --- one attempt -------------------------------------------------------------------------------
def step_run(row: RunRow, contact: dict[str, Any], version: LoadedVersion, step: Step, now: datetime) -> StepRun:
    return StepRun(
        execution_id=row.id,
        account_id=row.account_id,
        contact_id=row.contact_id,
        step=step,
        workflow_id=version.workflow_id,
        workflow_name=version.workflow_name,
        context=row.context,
        now=now,
        renderer=renderer,
        manual_retries=row.manual_retries,
        version_id=version.id,
        _contact=contact,
    )


def carry_out(executor: ActionExecutor, step_run: StepRun, row: RunRow, version: LoadedVersion) -> Attempt:
    """Carry out the action; the events its contact change causes know this run as their origin."""
    origin = ChainOrigin(execution_id=row.id, workflow_id=version.workflow_id, depth=row.depth)
    started = time.monotonic()
    try:
        with caused_by(origin):
            # Internal actions make one call to a contacts service, whose own atomic block is the savepoint
            # that undoes a failed change; the run's transaction stays usable to record the failure.
            result = executor.execute(step_run)
        error = None
    except Exception as exc:  # classified by the RetryService; the stack trace goes to the debug log
        log.debug("run %s step %s raised", row.id, step_run.step.index, exc_info=exc)
        result, error = None, exc
    return Attempt(result, error, int((time.monotonic() - started) * 1000))


# --- recording it ------------------------------------------------------------------------------
def record(
    store: RunStore,
    row: RunRow,
    run: Execution,
    step: Step,
    attempt_number: int,
    attempt: Attempt,
    started_at: datetime,
    job: JobContext,
) -> None:
    """One transaction: the log row, the run's move, the next job, and this job's completion. Its now is the
    database's as of the run's lock (`store.now()`)."""
    now = store.now()
    move, log_values = settle(row, run, step, attempt_number, attempt, started_at, now)
    goal_log = None
    if run.status not in ENDED:
        version = load_version(row.version_id)
        goal = pending_goal(row, version)  # met while the step was in flight: it, not what follows, comes next
        if goal is not None:
            move, goal_log = reach_goal(row, run, version, goal, now)
    enact(row, run, move, completing=job)  # this job completes, what follows is queued: one statement
    store.record_step(row, [*row.apply(run), "next_job_id"], log_values)
    if goal_log is not None:
        store.insert_log(**goal_log)


def record_external(
    store: RunStore,
    row: RunRow,
    step: Step,
    attempt_number: int,
    attempt: Attempt,
    now: datetime,
    job: JobContext,
) -> None:
    """One transaction records an external action's attempt (or, if refused, that it could not be)."""
    try:
        with transaction.atomic(durable=True):
            locked = store.lock_run(row.id)
            if locked is None or not holds(locked, job, step.index):  # erased meanwhile (contact deleted)
                return
            record(store, locked, locked.to_domain(), step, attempt_number, attempt, now, job)
    except (OperationalError, InterfaceError):
        raise  # the database is away, not refusing: the queue retries the job (the action runs again)
    except (DatabaseError, ValueError) as exc:
        # The database refused what we tried to record (or it could not be encoded). The action took
        # effect and cannot be undone; recording it again would be refused again. Record the step
        # FAILED without the refused data, so the run does not stay ACTIVE with a job that keeps dying.
        log.error(
            "run %s step %s: its outcome could not be stored (%s); the step is recorded failed without it",
            row.id,
            step.index,
            format_error(exc),
        )
        refused = Attempt(
            None,
            OutcomeNotStored(
                f"the step's outcome could not be stored ({type(exc).__name__}); the action may have taken effect"
            ),
            attempt.duration_ms,
        )
        with transaction.atomic(durable=True):
            locked = store.lock_run(row.id)
            if locked is None or not holds(locked, job, step.index):
                return
            record(store, locked, locked.to_domain(), step, attempt_number, refused, now, job)


def settle(
    row: RunRow,
    run: Execution,
    step: Step,
    attempt_number: int,
    attempt: Attempt,
    started_at: datetime,
    now: datetime,
) -> tuple[NextMove, dict[str, Any]]:
    """The run's move after this attempt (applied to `run`) and the attempt's log row; `now` (the database's,
    read with the run's lock) is when it is recorded: a retry is due its delay after it."""
    error_category = error_details = ""
    chosen: dict[str, Any] = {}  # what a deciding step chose, and why
    if attempt.error is None and attempt.result is not None and attempt.result.deferred is not None:
        # Not now: asked again at `until`; not an attempt, not a visit (Execution.step_deferred)
        deferral = attempt.result.deferred
        move = run.step_deferred(now, deferral.until)
        outcome = StepOutcome.DEFERRED
        data = bounded_response({**attempt.result.data, **deferral.log_data()})
        log.info(
            "run %s step %s (%s) deferred until %s: %s",
            row.id,
            step.index,
            step.action_type,
            deferral.until.isoformat(),
            deferral.reason,
        )
    elif attempt.error is None:
        result = attempt.result
        assert result is not None  # an attempt without an error has its result
        data = bounded_response(result.data)  # the log row's: shown
        output = data if result.output is None else bounded_output(result.output)  # what later steps read
        to = step.goto if result.next_key is None else step.goto_key(result.next_key)
        if result.event_wait_until is not None:
            move = run.begin_event_wait(now, result.event_wait_until)
        elif result.wait_until is not None:
            move = run.begin_wait(now, result.wait_until, output, to)
        else:
            move = run.step_succeeded(now, output, to, reason=result.end_reason)
        chosen = bounded_response(result.decision)
        outcome = StepOutcome.SKIPPED if result.skipped else StepOutcome.SUCCEEDED
    else:
        decision = step_retry_service().decide(error=attempt.error, attempt_number=attempt_number, overrides=step.retry)
        error_category, error_details = decision.error.category.value, decision.error.message
        move = run.step_failed(now, error=error_details, category=error_category, retry_delay=decision.delay)
        will_retry = decision.will_retry and run.status is not ExecutionStatus.CANCELLED
        outcome = StepOutcome.RETRYING if will_retry else StepOutcome.FAILED
        data = {
            **failure_details(attempt.error),  # what the other side answered, if it did (redacted)
            "reason": decision.reason if run.status is not ExecutionStatus.CANCELLED else "the run was cancelled",
        }
        if will_retry and decision.delay is not None:  # will_retry: there is a delay
            data["retry_in_seconds"] = round(decision.delay, 3)
        data = bounded_response(data)
        log.log(
            logging.INFO if decision.will_retry else logging.WARNING,
            "run %s step %s (%s) attempt %s %s: %s (%s)",
            row.id,
            step.index,
            step.action_type,
            attempt_number,
            outcome,
            error_details,
            decision.reason,
        )
    return move, {
        "execution_id": row.id,
        "step_index": step.index,
        "step_key": step.key,
        "step_name": step.label,
        "action_type": step.action_type,
        "attempt_number": attempt_number,
        "outcome": outcome.value,
        "started_at": started_at,
        "duration_ms": attempt.duration_ms,
        "error_category": error_category,
        "error_details": error_details,
        "response_data": data,
        "decision": chosen,
    }


def step_retry_service() -> RetryService:
    """The workflow's retry numbers, read from the settings when a step failed."""
    return RetryService(
        RetryPolicy(
            max_attempts=int(settings.WORKFLOW_STEP_MAX_ATTEMPTS),
            base_delay=float(settings.WORKFLOW_STEP_BASE_DELAY),
            max_delay=float(settings.WORKFLOW_STEP_MAX_DELAY),
            jitter=float(settings.WORKFLOW_STEP_JITTER),
        )
    )


# --- which path a step job takes ---------------------------------------------------------------
def executor_at(version_id: UUID | str, step_index: int) -> ActionExecutor | None:
    """The executor of a version's step, from the cached version; None if there is no such step."""
    try:
        steps = load_version(run_id(version_id)).definition.steps
    except (ExecutionNotFound, WorkflowVersion.DoesNotExist):
        return None
    return executor_for(steps[step_index].action_type) if 0 <= step_index < len(steps) else None


def is_external(version_id: UUID | str, step_index: int) -> bool:
    executor = executor_at(version_id, step_index)
    return executor is not None and executor.external
