"""The life of a run: seven states, one transition table, and the entity that moves through them.

A run (WorkflowExecution) carries one contact through the steps of one
workflow version, one step at a time:

    QUEUED     its next step is on the queue (the first one, the next one, a retry or a deferred step due at
               resume_at)
    ACTIVE     a worker is carrying out its current step right now
    WAITING    a wait step is counting down to resume_at, or a wait_for_event step waits for its event
               (at most until resume_at, its timeout)
    PAUSED     an operator paused it: nothing moves until resume (paused_from remembers where it was)
    COMPLETED  every step is done
    FAILED     a step failed for good (permanent error, or its attempts ran out); retry starts from that step
    CANCELLED  an operator stopped it; it never runs another step

The entity decides every move and says what must happen next (a NextMove:
queue the step, queue the end of a wait, keep the step in flight, or
nothing). The application enacts that move on the job queue, in the same
transaction that saves the run. Nothing here knows Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from workflows.domain.errors import IllegalExecutionTransition


class ExecutionStatus(StrEnum):
    QUEUED = "queued"
    ACTIVE = "active"
    PAUSED = "paused"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Why each move exists:
#   queued    -> active      a worker begins the step
#   queued    -> paused      an operator pauses it (its queued job is cancelled)
#   queued    -> cancelled   an operator cancels it
#   queued    -> failed      its step job ended dead on the queue (e.g. the database refused it every time)
#   active    -> queued      the step succeeded and the next is queued, or it failed and will be retried, or it
#                            was deferred (a send window, a frequency cap) and is asked again at its `until`
#   active    -> waiting     a wait step began
#   active    -> completed   the last step succeeded, an end step or a goal ended it
#   active    -> failed      the step failed for good
#   active    -> paused      an operator pauses it while a step is in flight (that step still finishes)
#   active    -> cancelled   an operator cancels it while a step is in flight (that step is logged, nothing more)
#   waiting   -> queued      resume_at came
#   waiting   -> paused      paused during the wait: nothing happens at resume_at
#   waiting   -> cancelled
#   waiting   -> failed      its resume job ended dead on the queue
#   paused    -> queued      resume: run the current step (now, or at the retry time it was given)
#   paused    -> active      resume while the step that was in flight at pause time is still running
#   paused    -> waiting     resume before resume_at: wait the remainder
#   paused    -> completed   the step in flight at pause time was the last, and it succeeded; or a goal was met
#   paused    -> failed      the step in flight at pause time failed for good
#   paused    -> cancelled
#   failed    -> queued      manual retry: start again from the failed step
TRANSITIONS: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    ExecutionStatus.QUEUED: frozenset(
        {ExecutionStatus.ACTIVE, ExecutionStatus.PAUSED, ExecutionStatus.CANCELLED, ExecutionStatus.FAILED}
    ),
    ExecutionStatus.ACTIVE: frozenset(
        {
            ExecutionStatus.QUEUED,
            ExecutionStatus.WAITING,
            ExecutionStatus.COMPLETED,
            ExecutionStatus.FAILED,
            ExecutionStatus.PAUSED,
            ExecutionStatus.CANCELLED,
        }
    ),
    ExecutionStatus.WAITING: frozenset(
        {ExecutionStatus.QUEUED, ExecutionStatus.PAUSED, ExecutionStatus.CANCELLED, ExecutionStatus.FAILED}
    ),
    ExecutionStatus.PAUSED: frozenset(
        {
            ExecutionStatus.QUEUED,
            ExecutionStatus.ACTIVE,
            ExecutionStatus.WAITING,
            ExecutionStatus.COMPLETED,
            ExecutionStatus.FAILED,
            ExecutionStatus.CANCELLED,
        }
    ),
    ExecutionStatus.FAILED: frozenset({ExecutionStatus.QUEUED}),
    ExecutionStatus.COMPLETED: frozenset(),
    ExecutionStatus.CANCELLED: frozenset(),
}

# Runs that count toward the account's max_concurrent_executions: they hold (or are about to hold) a worker.
# WAITING and PAUSED runs do not: a thousand contacts waiting two days must not block new runs.
COUNTED_FOR_LIMIT = frozenset({ExecutionStatus.QUEUED, ExecutionStatus.ACTIVE})
# Runs in progress, for the re-enrollment rule ("may a contact be enrolled while a run is in progress").
UNFINISHED = frozenset(
    {ExecutionStatus.QUEUED, ExecutionStatus.ACTIVE, ExecutionStatus.WAITING, ExecutionStatus.PAUSED}
)
ENDED = frozenset({ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED})


def _entering(target: ExecutionStatus) -> frozenset[ExecutionStatus]:
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)


# What an operator's move needs the run to be in. Pause and cancel: every state the table lets reach PAUSED or
# CANCELLED. Resume and retry each undo one state (a pause, a failure): a run may be QUEUED from elsewhere too,
# so the table alone cannot say it. The entity's moves check this (`Execution._require_move`) and the bulk moves
# count by it: one rule for both.
OPERATOR_MOVES: dict[str, frozenset[ExecutionStatus]] = {
    "pause": _entering(ExecutionStatus.PAUSED),
    "cancel": _entering(ExecutionStatus.CANCELLED),
    "resume": frozenset({ExecutionStatus.PAUSED}),
    "retry": frozenset({ExecutionStatus.FAILED}),
}


def can_transition(current: ExecutionStatus | str, target: ExecutionStatus | str) -> bool:
    return ExecutionStatus(target) in TRANSITIONS[ExecutionStatus(current)]


def check_transition(
    current: ExecutionStatus | str, target: ExecutionStatus | str, action: str | None = None
) -> ExecutionStatus:
    """Return `target` if the table allows the move, else raise IllegalExecutionTransition."""
    if not can_transition(current, target):
        raise IllegalExecutionTransition(ExecutionStatus(current).value, ExecutionStatus(target).value, action)
    return ExecutionStatus(target)


class StepOutcome(StrEnum):
    """What one attempt of one step came to; one ExecutionLog row each."""

    SUCCEEDED = "succeeded"
    RETRYING = "retrying"  # failed for a passing reason; another attempt is queued
    FAILED = "failed"  # failed for good: permanent error or attempts exhausted
    SKIPPED = "skipped"  # not carried out, on purpose (consent, no address); the run goes on
    # not now (a send window closed, a frequency cap reached): the step is asked again at its `until`; not an
    # attempt (the next one has the same number) and not a visit (the run's path does not grow)
    DEFERRED = "deferred"


class MoveKind(Enum):
    NOTHING = "nothing"  # no job: the run ended, or it is paused
    KEEP = "keep"  # the job in flight carries on; queue nothing
    RUN_STEP = "run_step"  # queue a `workflow_step` job for the current step
    END_WAIT = "end_wait"  # queue a `workflow_resume` job due at resume_at


MAX_STEP_VISITS = 1000  # steps one run may go through unattended: a loop (which must wait) cannot cycle forever
LOOP_CAPPED = "loop_capped"
# In a run's context: how many steps it had gone through when an operator last retried it past the loop cap.
# The cap counts the steps since then, so each retry of a capped run allows MAX_STEP_VISITS more, and only an
# operator's retry moves it (`Execution.retry`).
VISITS_ALLOWED_FROM = "visits_allowed_from"


@dataclass(frozen=True)
class Goto:
    """Where a run goes next: a step (its index in the version and its key), or the end (index None)."""

    index: int | None
    key: str

    @property
    def ends(self) -> bool:
        return self.index is None


@dataclass(frozen=True)
class NextMove:
    kind: MoveKind
    at: datetime | None = None  # None: at once

    @classmethod
    def nothing(cls) -> NextMove:
        return cls(MoveKind.NOTHING)


class StepGate(Enum):
    """What a step job may do when it arrives."""

    RUN = "run"  # carry out the current step
    RELEASE = "release"  # the run is paused: let go of the step, resume will queue it again
    IGNORE = "ignore"  # stale or duplicate job: the run has moved on


@dataclass
class Execution:
    """One run, as plain data plus the rules that move it. The database row is its persisted form."""

    status: ExecutionStatus
    step_count: int
    current_step_index: int = 0
    current_step_key: str = ""  # the key of the step at current_step_index ("" once the steps are done)
    end_reason: str = ""  # why it completed, when a step or a goal ended it early ("ended by step")
    retry_count: int = 0  # failed attempts of the current step so far; the next attempt is retry_count + 1
    manual_retries: int = 0  # operators' retries after FAILED: each sends its steps' webhooks as new messages
    resume_at: datetime | None = None  # end of a wait, or when a queued retry is due
    paused_from: ExecutionStatus | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None  # when it reached COMPLETED, FAILED or CANCELLED
    last_error: str = ""
    last_error_category: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    context_changed: bool = False  # so a save writes the (growing) context only when a step added to it

    # --- starting ------------------------------------------------------------------
    @classmethod
    def start(
        cls, *, step_count: int, trigger_data: dict[str, Any], event: str = "", first_key: str = ""
    ) -> tuple[Execution, NextMove]:
        if step_count < 1:
            raise ValueError("a run needs at least one step")
        run = cls(
            status=ExecutionStatus.QUEUED,
            step_count=step_count,
            current_step_key=first_key,
            # `step_keys`: whose result each entry of `steps` is (so a condition can read `steps.<key>`); with
            # the current step they are the run's path (`run_path`).
            context={"event": event, "trigger": dict(trigger_data), "steps": [], "step_keys": []},
            context_changed=True,
        )
        return run, NextMove(MoveKind.RUN_STEP)

    # --- the worker's side ---------------------------------------------------------
    @property
    def attempt_number(self) -> int:
        return self.retry_count + 1

    @property
    def is_finished_with_steps(self) -> bool:
        return self.current_step_index >= self.step_count

    def step_job_arrived(self) -> StepGate:
        """Decide what a step job that holds this run's next move may do."""
        if self.status in (ExecutionStatus.QUEUED, ExecutionStatus.ACTIVE):
            # ACTIVE here means an earlier attempt of this same job died mid-step: run it again.
            return StepGate.RUN
        if self.status is ExecutionStatus.PAUSED:
            return StepGate.RELEASE
        return StepGate.IGNORE

    def begin_step(self, now: datetime) -> None:
        if self.status is not ExecutionStatus.ACTIVE:
            self._move(ExecutionStatus.ACTIVE, "begin a step of")
        if self.started_at is None:
            self.started_at = now

    def release_step(self) -> None:
        """A step job found the run paused: it lets go, so resume queues the step again."""
        if self.status is ExecutionStatus.PAUSED:
            self.paused_from = ExecutionStatus.QUEUED

    def step_succeeded(
        self, now: datetime, result: dict[str, Any], to: Goto | None = None, *, reason: str = ""
    ) -> NextMove:
        """The current step is done (or skipped on purpose): go to `to` (None: the following step), and say
        what comes next. `reason`: why the run ends here, when `to` is the end ("ended by step")."""
        if self.status is ExecutionStatus.CANCELLED:
            return NextMove.nothing()  # logged, but a cancelled run never moves again
        self._require_step_in_flight("finish a step of")
        self._add_result(result)
        self.retry_count = 0
        self.resume_at = None
        if not self._go(to, now):
            return NextMove.nothing()
        if to is not None and to.ends and reason:
            self.end_reason = reason
        return self._after_step(now)

    def step_failed(self, now: datetime, *, error: str, category: str, retry_delay: float | None) -> NextMove:
        """The current step's attempt failed; `retry_delay` None means it will not be tried again."""
        if self.status is ExecutionStatus.CANCELLED:
            return NextMove.nothing()
        self._require_step_in_flight("fail a step of")
        self.last_error = error
        self.last_error_category = category
        if retry_delay is None:
            self._move(ExecutionStatus.FAILED, "fail")
            self._ended(now)
            return NextMove.nothing()
        self.retry_count += 1
        due = now + timedelta(seconds=retry_delay)
        self.resume_at = due
        if self.status is ExecutionStatus.PAUSED:
            self.paused_from = ExecutionStatus.QUEUED  # resume queues the retry (at `due` if still ahead)
            return NextMove.nothing()
        self._move(ExecutionStatus.QUEUED, "retry a step of")
        return NextMove(MoveKind.RUN_STEP, due)

    def step_deferred(self, now: datetime, until: datetime) -> NextMove:
        """The current step may not act yet (a send window, a frequency cap): it is asked again at `until`.

        Not an attempt (`retry_count` stays, so the next attempt has the same number and the same retries left)
        and not a visit (no result is added: the path, the loop cap and the step's message id are unchanged). The
        run is QUEUED with its step job due at `until`, as a retry is, so every path that reaches a queued run
        reaches a deferred one: a goal, a cancel, a pause (resume keeps the due time).
        """
        if self.status is ExecutionStatus.CANCELLED:
            return NextMove.nothing()
        self._require_step_in_flight("defer a step of")
        self.resume_at = until if until > now else None
        if self.status is ExecutionStatus.PAUSED:
            self.paused_from = ExecutionStatus.QUEUED  # resume queues the step (at `until` if still ahead)
            return NextMove.nothing()
        self._move(ExecutionStatus.QUEUED, "defer a step of")
        return NextMove(MoveKind.RUN_STEP, self.resume_at)

    def begin_wait(self, now: datetime, until: datetime, result: dict[str, Any], to: Goto | None = None) -> NextMove:
        """A wait step: the step itself is done at once; the run then waits until `until` before going to `to`."""
        self._require(ExecutionStatus.ACTIVE, "wait in")
        self._add_result(result)
        self.retry_count = 0
        if not self._go(to, now):
            return NextMove.nothing()
        if until <= now:  # a date already past: nothing to wait for
            self.resume_at = None
            return self._after_step(now)
        self._move(ExecutionStatus.WAITING, "wait in")
        self.resume_at = until
        return NextMove(MoveKind.END_WAIT, until)

    def begin_event_wait(self, now: datetime, timeout_at: datetime) -> NextMove:
        """A wait_for_event step began: the run stays on it, WAITING, until its event or `timeout_at`.

        Unlike a time wait, the step is not done yet: which step follows depends on what ends the wait
        (`event_wait_over`). The job due at `timeout_at` is the timeout's; an event wakes the run sooner.
        """
        self._require(ExecutionStatus.ACTIVE, "wait in")
        self.retry_count = 0
        self._move(ExecutionStatus.WAITING, "wait in")
        self.resume_at = timeout_at
        return NextMove(MoveKind.END_WAIT, timeout_at)

    def event_wait_over(self, now: datetime, result: dict[str, Any], to: Goto) -> NextMove:
        """The event came, or the timeout passed (the wait store decided which): the wait step is done, and the
        run goes to `to` (the step's `next`, or its `on_timeout`)."""
        self._require(ExecutionStatus.WAITING, "end the wait of")
        self.resume_at = None
        self._move(ExecutionStatus.QUEUED, "end the wait of")
        self._move(ExecutionStatus.ACTIVE, "finish the wait of")
        return self.step_succeeded(now, result, to)

    def goal_reached(self, now: datetime, reason: str, to: Goto) -> NextMove:
        """A goal was met: the run completes with `reason` (`to` is the end) or goes to the step `to` names.

        From QUEUED (its next step, or a retry, not started), WAITING (a wait, or an event wait) or PAUSED;
        a step in flight is not interrupted: this is called once it finished (its own move already made).
        """
        if self.status in ENDED:
            return NextMove.nothing()
        self.resume_at = None
        self.retry_count = 0
        if self.status is ExecutionStatus.WAITING:
            self._move(ExecutionStatus.QUEUED, "end the wait of")
        if self.status is ExecutionStatus.QUEUED:
            self._move(ExecutionStatus.ACTIVE, "meet a goal in")
        if to.ends:
            self.current_step_index = self.step_count
            self.current_step_key = ""
            self.end_reason = reason
            self._move(ExecutionStatus.COMPLETED, "complete")
            self._ended(now)
            return NextMove.nothing()
        self.context_changed = True  # the path gains the step it goes to
        if not self._go(to, now):
            return NextMove.nothing()
        return self._after_step(now)

    def wait_over(self, now: datetime) -> NextMove | None:
        """The job due at resume_at arrived. None: it is stale (the run is not waiting any more)."""
        if self.status is not ExecutionStatus.WAITING:
            return None
        if self.resume_at is not None and self.resume_at > now:
            return NextMove(MoveKind.END_WAIT, self.resume_at)  # early (clocks differ): wait the rest
        self.resume_at = None
        self._move(ExecutionStatus.QUEUED, "end the wait of")
        if self.is_finished_with_steps:  # the wait was the last step
            self._move(ExecutionStatus.ACTIVE, "complete")
            return self._after_step(now)
        return NextMove(MoveKind.RUN_STEP)

    def job_lost(self, now: datetime, *, error: str, category: str) -> bool:
        """The job that held the run's next move ended for good without moving it (dead on the queue).

        Nothing will move the run any more, so it fails where it is (a manual retry starts that step
        again). False when it had already ended.
        """
        if self.status in ENDED:
            return False
        self.last_error = error
        self.last_error_category = category
        self._move(ExecutionStatus.FAILED, "fail")
        self._ended(now)
        return True

    # --- the operator's side ----------------------------------------------------------
    def pause(self, now: datetime) -> None:
        previous = self.status
        self._move(ExecutionStatus.PAUSED, "pause")
        self.paused_from = previous

    def resume(self, now: datetime) -> NextMove:
        """Carry on from where the pause caught the run."""
        self._require_move("resume")
        came_from = self.paused_from or ExecutionStatus.QUEUED
        self.paused_from = None
        if came_from is ExecutionStatus.ACTIVE:
            self._move(ExecutionStatus.ACTIVE, "resume")
            return NextMove(MoveKind.KEEP)  # the step in flight finishes and queues what follows
        if came_from is ExecutionStatus.WAITING and self.resume_at is not None and self.resume_at > now:
            self._move(ExecutionStatus.WAITING, "resume")
            return NextMove(MoveKind.END_WAIT, self.resume_at)  # wait the remainder
        due = self.resume_at if came_from is ExecutionStatus.QUEUED else None
        if due is not None and due <= now:
            due = None
        if came_from is ExecutionStatus.WAITING:
            self.resume_at = None
        if self.is_finished_with_steps:  # a wait that was the last step ended during the pause
            self._move(ExecutionStatus.COMPLETED, "resume")
            self._ended(now)
            return NextMove.nothing()
        self._move(ExecutionStatus.QUEUED, "resume")
        return NextMove(MoveKind.RUN_STEP, due)

    def cancel(self, now: datetime) -> None:
        self._move(ExecutionStatus.CANCELLED, "cancel")
        self._ended(now)

    @property
    def loop_capped(self) -> bool:
        """It failed because it reached the loop cap (and nothing else failed it since)."""
        return self.status is ExecutionStatus.FAILED and self.last_error_category == LOOP_CAPPED

    @property
    def steps_counted(self) -> int:
        """The steps the loop cap counts: those finished since an operator last lifted the cap."""
        done = self.context.get("step_keys")
        if not isinstance(done, list):
            return 0  # runs from before the graph: their steps are in order, no loop to cap
        since = self.context.get(VISITS_ALLOWED_FROM, 0)
        return len(done) - (since if isinstance(since, int) else 0)

    def retry(self, now: datetime) -> NextMove:
        """Manual retry of a failed run: start again from the step that failed, with fresh attempts.

        A run the loop cap failed starts again at the step it was about to go to, with a fresh allowance of
        MAX_STEP_VISITS steps: the cap bounds one unattended stretch, and the operator's retry is a decision
        to let it go on. This is the only move that lifts the cap.
        """
        self._require_move("retry")
        if self.loop_capped:
            done = self.context.get("step_keys")
            self.context[VISITS_ALLOWED_FROM] = len(done) if isinstance(done, list) else 0
            self.context_changed = True
        self._move(ExecutionStatus.QUEUED, "retry")
        self.manual_retries += 1
        self.retry_count = 0
        self.resume_at = None
        self.completed_at = None
        if self.is_finished_with_steps:  # it failed at the end of a last wait (its resume job died)
            self._move(ExecutionStatus.ACTIVE, "complete")
            return self._after_step(now)
        return NextMove(MoveKind.RUN_STEP)

    # --- helpers --------------------------------------------------------------------------
    def _add_result(self, result: dict[str, Any]) -> None:
        """What the step returned, for later steps' templates (`steps.N`) and conditions (`steps.<key>`)."""
        self.context.setdefault("steps", []).append(result)
        if "step_keys" in self.context:  # runs started before the graph have none: their steps are in order
            self.context["step_keys"].append(self.current_step_key)
        self.context_changed = True

    def _go(self, to: Goto | None, now: datetime) -> bool:
        """Move to the step `to` names (None: the following one in order). False: the loop cap was reached and
        the run failed instead."""
        if to is None:
            self.current_step_index += 1
            self.current_step_key = ""
        elif to.index is None:
            self.current_step_index = self.step_count
            self.current_step_key = ""
        else:
            self.current_step_index = to.index
            self.current_step_key = to.key
        if self.is_finished_with_steps:
            self.current_step_key = ""
            return True
        if to is not None and self.steps_counted >= MAX_STEP_VISITS:
            self.last_error = (
                f"the run went through {MAX_STEP_VISITS} steps: a loop is capped so a run cannot cycle forever"
            )
            self.last_error_category = LOOP_CAPPED
            self._move(ExecutionStatus.FAILED, "fail")
            self._ended(now)
            return False
        return True

    def _after_step(self, now: datetime) -> NextMove:
        if self.is_finished_with_steps:
            self._move(ExecutionStatus.COMPLETED, "complete")
            self._ended(now)
            return NextMove.nothing()
        if self.status is ExecutionStatus.PAUSED:
            self.paused_from = ExecutionStatus.QUEUED  # resume queues the next step
            return NextMove.nothing()
        self._move(ExecutionStatus.QUEUED, "queue the next step of")
        return NextMove(MoveKind.RUN_STEP)

    def _ended(self, now: datetime) -> None:
        self.completed_at = now
        self.paused_from = None
        self.resume_at = None

    def _require_step_in_flight(self, action: str) -> None:
        if self.status not in (ExecutionStatus.ACTIVE, ExecutionStatus.PAUSED):
            raise IllegalExecutionTransition(self.status.value, ExecutionStatus.QUEUED.value, action)

    def _require_move(self, move: str) -> None:
        """An operator's move (OPERATOR_MOVES) from a state that does not allow it is refused."""
        allowed = OPERATOR_MOVES[move]
        if self.status not in allowed:
            raise IllegalExecutionTransition(self.status.value, "|".join(sorted(allowed)), move)

    def _require(self, status: ExecutionStatus, action: str) -> None:
        if self.status is not status:
            raise IllegalExecutionTransition(self.status.value, status.value, action)

    def _move(self, target: ExecutionStatus, action: str) -> None:
        self.status = check_transition(self.status, target, action)


def run_path(context: Any, current_step_index: int, step_count: int, current_step_key: str = "") -> list[str]:
    """The keys of the steps a run went through, in order: the steps it finished, then the one it is at (if
    any). A run started before steps had keys went through its version's steps in order, up to where it is:
    their keys are step_1, step_2, ..."""
    done = context.get("step_keys") if isinstance(context, dict) else None
    if isinstance(done, list):
        return [*(str(key) for key in done), *([current_step_key] if current_step_key else [])]
    reached = min(current_step_index + 1, step_count)
    return [f"step_{n}" for n in range(1, reached + 1)]
