"""Runs waiting for an event: an event wakes them (`wake_waiting_runs`), the `workflow_event` job moves them
(`event_arrived`), and the timeout's `workflow_resume` job ends the wait the other way (`wait_timed_out`).

1. An event (any: a tag added, a click, a custom event) looks up the runs of
   its contact waiting on its name, by the wait store's index (one statement,
   however many runs wait on other events), judges each wait's `match`, and
   records itself on each wait it satisfies, if it came before the timeout
   and no event did before it. For each it queues a `workflow_event` job:
   in the event's transaction, so the job exists iff the event commits, and
   on PostgreSQL the job's NOTIFY wakes an idle worker at that commit. The
   event's transaction never locks a run (a step of another run may be the
   one adding the tag): the wait's row is all it touches.
2. The `workflow_event` job locks the run: WAITING on that wait, it resolves
   the wait (the event won), logs the decision, cancels the timeout's job and
   queues the step after (`next`). PAUSED: it does nothing; the event stays
   recorded on the wait and the resume acts on it. Ended: nothing.
3. The timeout's job (`workflow_resume` at the timeout, the job the run
   holds) locks the run and the wait: an event recorded on it won (it came
   first); otherwise the time is up and the run goes `on_timeout`. Exactly one
   of the two resolves the wait (the row is deleted by whoever does), and the
   log row says which: `{"kind": "event", "event_id", "at"}` or
   `{"kind": "timeout"}`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.db import transaction

from contacts.application.events import ContactEvent
from jobs.public import JobContext, enqueue
from workflows.application.definitions import load_version
from workflows.application.runs.history import decision_row
from workflows.application.runs.moves import cancel_next_job, enact, holds, run_id
from workflows.domain.execution import ExecutionStatus, MoveKind, NextMove
from workflows.domain.logs import bounded_response
from workflows.domain.waits import EventWait, WaitOutcome, event_matches, needs_contact, resolve
from workflows.domain.workflow import Step
from workflows.infrastructure.store import RunRow, RunStore
from workflows.infrastructure.waits import WaitStore

log = logging.getLogger("relay.workflows")

EVENT_HANDLER = "workflow_event"


def wake_waiting_runs(event: ContactEvent) -> list[UUID]:
    """Record the event on every wait of its contact it satisfies; queue the job that moves each. In the
    event's transaction. Returns the runs woken."""
    store = WaitStore()
    waiting = store.waiting_for(event.account_id, event.contact_id, event.name)
    if not waiting:
        return []
    contact: dict[str, Any] | None = None
    woken = []
    for wait in waiting:
        if contact is None and needs_contact(event.name, wait.match):
            contact = RunStore().contact(event.contact_id, event.account_id) or {}
        if not event_matches(
            event.name, event.data, wait.match, run_id=str(wait.execution_id), contact=contact, now=event.occurred_at
        ):
            continue
        if not store.record_event(wait.execution_id, event_id=event.id, at=event.occurred_at, data=event.data):
            continue  # the timeout (or an earlier event) won
        enqueue(
            EVENT_HANDLER,
            {"execution_id": str(wait.execution_id)},
            queue=settings.WORKFLOW_QUEUE,
            account=event.account_id,
        )
        woken.append(wait.execution_id)
    return woken


def event_arrived(*, execution_id: UUID | str, job: JobContext) -> None:
    """The `workflow_event` job: an event was recorded on the run's wait; if the run still waits, it goes on."""
    _end_event_wait(run_id(execution_id), job, woken=True)


def wait_timed_out(row: RunRow, step: Step, job: JobContext, now: datetime) -> bool:
    """The timeout's job, for a run waiting in a wait_for_event step (called by `end_wait` under the run's
    lock; `now` the database's, read with it). False: the run has no event wait here (a time wait is
    ending), for the caller to handle."""
    return _resolve(RunStore(), row, step, job, now, woken=False)


def waiting_step(row: RunRow) -> Step | None:
    """The step waiting for an event the run is on (a wait_for_event step: its config is an EventWait), if any."""
    steps = load_version(row.version_id).definition.steps
    if not 0 <= row.current_step_index < len(steps):
        return None
    step = steps[row.current_step_index]
    return step if isinstance(step.config, EventWait) else None


def has_recorded_event(execution_id: UUID) -> bool:
    """Whether an event came while the run was paused (the resume then acts on it at once)."""
    wait = WaitStore().read(execution_id)
    return wait is not None and wait.recorded is not None


def _end_event_wait(execution_id: UUID, job: JobContext, *, woken: bool) -> None:
    store = RunStore()
    with transaction.atomic(durable=True):
        row = store.lock_run(execution_id)
        if row is None or row.status != ExecutionStatus.WAITING.value:
            return  # paused: the event stays recorded on the wait for the resume; ended: nothing to do
        step = waiting_step(row)
        if step is None:
            return
        _resolve(store, row, step, job, store.now(), woken=woken)


def _resolve(store: RunStore, row: RunRow, step: Step, job: JobContext, now: datetime, *, woken: bool) -> bool:
    """Under the run's lock: end the wait if the event came or the time is up (`now`: the database's), log
    which, queue what follows."""
    waits = WaitStore()
    wait = waits.lock(row.id)
    if wait is None or wait.step_key != step.key:
        return False
    outcome = resolve(wait.recorded, wait.timeout_at, now)
    run = row.to_domain()
    if outcome is None:
        if woken:
            return True  # a stale wake-up (the wait was begun again since): nothing recorded, nothing to do
        # The timeout's job came early (the clocks of two hosts differ): wait the rest.
        enact(row, run, NextMove(MoveKind.END_WAIT, wait.timeout_at), completing=job)
        store.update_run(row, [*row.apply(run), "next_job_id"])
        return True
    if woken and not holds(row, job, None):
        cancel_next_job(row)  # the timeout's job: it no longer holds the run, and is not needed
    waits.forget(row.id)
    config = cast(EventWait, step.config)
    to = step.goto if outcome.happened else step.goto_key(config.on_timeout)
    move = run.event_wait_over(now, outcome.result(), to)
    enact(row, run, move, completing=job)
    store.record_step(row, [*row.apply(run), "next_job_id"], _log_row(row, step, outcome, now))
    log.info("run %s step %s: wait for %s ended by %s", row.id, step.key, config.event, outcome.decision()["kind"])
    return True


def _log_row(row: RunRow, step: Step, outcome: WaitOutcome, now: Any) -> dict[str, Any]:
    return decision_row(
        row.id,
        step,
        outcome="succeeded",
        at=now,
        response=bounded_response(outcome.result()),
        decision=bounded_response(outcome.decision()),
    )
