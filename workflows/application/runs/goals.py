"""Goals: an event makes an enrolled contact meet one (`meet_goals`), and its run ends or jumps (`reach_goal`).

1. Every event of a contact (in the event's transaction) judges the goals of
   the contact's unfinished runs, over the contact as it is now, the run's
   trigger data and the event. The first goal met is recorded on the run
   (`GoalHit`: at most one per run) and a `workflow_goal` job is queued; the
   event's transaction never locks a run (a step of another run may be what
   caused the event).
2. That job locks the run: QUEUED (its next step or a retry not started),
   WAITING (a wait or an event wait) or PAUSED, the run ends COMPLETED with
   "goal met: <name>" (or goes to the step `then` names), its queued job is
   cancelled, its wait forgotten, and a log row says which goal. ACTIVE (a
   step in flight): nothing yet; that step finishes, and when it is recorded
   (`after_step`) the goal is carried out instead of what would follow.
3. A step job that finds a goal met before it starts its step carries out the
   goal instead (`pending_goal`): no later step starts, however the jobs race.

Only accounts with a published version that has goals or waits look
(`account_listens`: read in the event's transaction unless a worker already
knows the account listens).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cache
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.db.models.fields.json import KeyTransform

from accounts.application.selectors import account_time_zone
from contacts.application.clock import contact_clock
from contacts.application.events import ContactEvent
from jobs.public import JobContext, enqueue
from workflows.application.definitions import LoadedVersion, load_version
from workflows.application.runs.history import decision_row
from workflows.application.runs.moves import cancel_next_job, enact, run_id
from workflows.application.trigger_cache import trigger_cache
from workflows.domain.actions import END
from workflows.domain.conditions import Facts
from workflows.domain.execution import ENDED, UNFINISHED, Execution, ExecutionStatus, Goto, NextMove
from workflows.domain.goals import event_facts, first_met
from workflows.infrastructure.models import GoalHit, WorkflowExecution, WorkflowVersion
from workflows.infrastructure.store import RunRow, RunStore
from workflows.infrastructure.waits import WaitStore

log = logging.getLogger("relay.workflows")

GOAL_HANDLER = "workflow_goal"
_LISTENS_KEY = ("$listens", None)  # the trigger cache's entry for "this account has waits or goals" (yes only)
_GOALS_KEY = ("$goals", None)  # ... and for "it has goals" (yes only)
_YES = [(0, UUID(int=0))]

# While a batch of steps runs in one transaction (runs.batches): each account's answer, read once for it.
_read_in_this_batch: ContextVar[dict[int, tuple[bool, bool]] | None] = ContextVar("listening_answers", default=None)


def account_listens(account_id: int) -> bool:
    """Whether any published version of the account's workflows waits for events or has goals.

    Asked on every event, and a wrong "no" would be silent and final (a waiting run misses its event and
    takes its timeout's path; a goal is not met), so "no" is never taken from a cache: it is read in the
    event's own transaction (one indexed statement, once per account in a batch of steps). "Yes" is kept in
    the trigger cache: an account keeps its published versions, and a stale "yes" (its last such workflow
    deleted) only costs the exact lookups that follow.
    """
    if trigger_cache.trusted() and trigger_cache.get(account_id, _LISTENS_KEY)[0]:
        return True
    return _listening(account_id)[0]


def account_has_goals(account_id: int) -> bool:
    """Whether any published version of the account's workflows has goals (read as `account_listens`)."""
    if trigger_cache.trusted() and trigger_cache.get(account_id, _GOALS_KEY)[0]:
        return True
    return _listening(account_id)[1]


@contextmanager
def listening_read_once() -> Iterator[None]:
    """Inside one transaction that carries out many steps: read each account's answer once, not per event."""
    token = _read_in_this_batch.set({})
    try:
        yield
    finally:
        _read_in_this_batch.reset(token)


def _listening(account_id: int) -> tuple[bool, bool]:
    """(waits or goals, goals) as the database says now; the yeses are kept in the trigger cache."""
    batch = _read_in_this_batch.get()
    if batch is not None and account_id in batch:
        return batch[account_id]
    _, generation = trigger_cache.get(account_id, _LISTENS_KEY)
    versions = WorkflowVersion.objects.filter(workflow__account_id=account_id, listens=True)
    found = versions.aggregate(listens=Count("pk"), goals=Count("pk", filter=~Q(goals=[])))
    answer = (bool(found["listens"]), bool(found["goals"]))
    if trigger_cache.trusted():
        if answer[0]:
            trigger_cache.put(account_id, _LISTENS_KEY, _YES, generation)
        if answer[1]:
            trigger_cache.put(account_id, _GOALS_KEY, _YES, generation)
    if batch is not None:
        batch[account_id] = answer
    return answer


@dataclass(frozen=True)
class PendingGoal:
    goal: str
    then: str
    event_id: str
    event_name: str


def meet_goals(event: ContactEvent) -> list[UUID]:
    """Judge the goals of the contact's unfinished runs against this event; record each one met and queue its
    job. In the event's transaction. Returns the runs that met a goal."""
    if not account_has_goals(event.account_id):
        return []
    runs = (
        WorkflowExecution.objects.filter(
            account_id=event.account_id, contact_id=event.contact_id, status__in=[s.value for s in UNFINISHED]
        )
        .exclude(goal_hit__isnull=False)
        .annotate(trigger=KeyTransform("trigger", "context"))
        .values_list("id", "version_id", "trigger")
    )
    met = []
    contact: dict[str, Any] | None = None
    for execution_id, version_id, trigger in runs:
        goals = load_version(version_id).definition.goals
        if not goals:
            continue
        if contact is None:
            contact = RunStore().contact(event.contact_id, event.account_id) or {}
        facts = Facts(
            contact=contact,
            trigger=trigger if isinstance(trigger, dict) else {},
            event=event_facts(event.name, event.data),
            now=event.occurred_at,
            clock=_contact_clock(contact, event.account_id),
        )
        goal = first_met(goals, facts)
        if goal is None:
            continue
        try:
            with transaction.atomic():  # a savepoint: a goal already met keeps the caller's transaction usable
                GoalHit.objects.create(
                    execution_id=execution_id,
                    goal=goal.name,
                    then=goal.then,
                    event_id=event.id,
                    event_name=event.name,
                    met_at=event.occurred_at,
                )
        except IntegrityError:
            continue
        enqueue(
            GOAL_HANDLER, {"execution_id": str(execution_id)}, queue=settings.WORKFLOW_QUEUE, account=event.account_id
        )
        met.append(execution_id)
    return met


def pending_goal(row: RunRow, version: LoadedVersion) -> PendingGoal | None:
    """A goal the run met and that is not carried out yet (asked only when its version has goals)."""
    if not version.definition.goals:
        return None
    hit = GoalHit.objects.filter(execution_id=row.id, handled=False).values_list(
        "goal", "then", "event_id", "event_name"
    )
    found = hit.first()
    return PendingGoal(*found) if found else None


def goal_met(*, execution_id: UUID | str, job: JobContext) -> None:
    """The `workflow_goal` job: carry out the goal the run met, unless a step is in flight (it will)."""
    store = RunStore()
    with transaction.atomic(durable=True):
        row = store.lock_run(run_id(execution_id))
        if row is None:
            return
        status = ExecutionStatus(row.status)
        if status is ExecutionStatus.ACTIVE:
            return  # the step in flight finishes; recording it carries out the goal (after_step)
        version = load_version(row.version_id)
        goal = pending_goal(row, version)
        if goal is None:
            return
        if status in ENDED:
            GoalHit.objects.filter(execution_id=row.id).update(handled=True)
            return
        run = row.to_domain()
        move, log_row = reach_goal(row, run, version, goal, store.now())
        cancel_next_job(row)
        enact(row, run, move, completing=job)
        store.record_step(row, [*row.apply(run), "next_job_id"], log_row)


def reach_goal(
    row: RunRow, run: Execution, version: LoadedVersion, goal: PendingGoal, now: datetime
) -> tuple[NextMove, dict[str, Any]]:
    """The run's move for the goal (applied to `run`), its wait forgotten, the goal marked carried out, and the
    log row that says so. The caller enacts the move (and cancels the job the run held, if it must)."""
    steps = version.definition.steps
    where = steps[row.current_step_index] if 0 <= row.current_step_index < len(steps) else steps[-1]
    target = next((s for s in steps if s.key == goal.then), None) if goal.then != END else None
    to = Goto(target.index, target.key) if target is not None else Goto(None, END)
    move = run.goal_reached(now, f"goal met: {goal.goal}", to)
    WaitStore().forget(row.id)
    GoalHit.objects.filter(execution_id=row.id).update(handled=True)
    log.info("run %s met goal %r (event %s): %s", row.id, goal.goal, goal.event_name, "ends" if to.ends else to.key)
    decision = {"kind": "goal", "goal": goal.goal, "event_id": goal.event_id, "next": to.key}
    response = {"goal": goal.goal, "event": goal.event_name}
    return move, decision_row(row.id, where, outcome="skipped", at=now, response=response, decision=decision)


def _contact_clock(contact: dict[str, Any], account_id: int) -> Callable[[], tzinfo]:
    """The contact's zone for its goals' dates, resolved once and only if a condition compares a bare date."""
    return cache(lambda: ZoneInfo(contact_clock(contact, account_time_zone=account_time_zone(account_id)).time_zone))
