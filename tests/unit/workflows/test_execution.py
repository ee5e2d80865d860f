"""The run's seven states: every allowed and every forbidden move, and the entity's decisions."""

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from workflows.domain.errors import IllegalExecutionTransition
from workflows.domain.execution import (
    OPERATOR_MOVES,
    TRANSITIONS,
    Execution,
    ExecutionStatus,
    MoveKind,
    StepGate,
    can_transition,
    check_transition,
)

S = ExecutionStatus
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

ALLOWED = {
    (S.QUEUED, S.ACTIVE),
    (S.QUEUED, S.PAUSED),
    (S.QUEUED, S.CANCELLED),
    (S.QUEUED, S.FAILED),
    (S.ACTIVE, S.QUEUED),
    (S.ACTIVE, S.WAITING),
    (S.ACTIVE, S.COMPLETED),
    (S.ACTIVE, S.FAILED),
    (S.ACTIVE, S.PAUSED),
    (S.ACTIVE, S.CANCELLED),
    (S.WAITING, S.QUEUED),
    (S.WAITING, S.PAUSED),
    (S.WAITING, S.CANCELLED),
    (S.WAITING, S.FAILED),
    (S.PAUSED, S.QUEUED),
    (S.PAUSED, S.ACTIVE),
    (S.PAUSED, S.WAITING),
    (S.PAUSED, S.COMPLETED),
    (S.PAUSED, S.FAILED),
    (S.PAUSED, S.CANCELLED),
    (S.FAILED, S.QUEUED),
}
ALL_PAIRS = list(itertools.product(S, S))


def test_there_are_seven_states():
    assert {s.value for s in S} == {"queued", "active", "paused", "waiting", "completed", "failed", "cancelled"}
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED))
def test_allowed_moves(current, target):
    assert can_transition(current, target)
    assert check_transition(current, target) is target


@pytest.mark.parametrize(("current", "target"), [p for p in ALL_PAIRS if p not in ALLOWED])
def test_forbidden_moves_raise_with_the_current_state(current, target):
    assert not can_transition(current, target)
    with pytest.raises(IllegalExecutionTransition) as info:
        check_transition(current, target, "do it to")
    assert info.value.current == current.value
    assert info.value.target == target.value
    assert f"a run that is {current.value}" in str(info.value)


def run_at(status: ExecutionStatus, *, step_count: int = 3, index: int = 0, **kwargs) -> Execution:
    return Execution(status=status, step_count=step_count, current_step_index=index, **kwargs)


def test_start_queues_the_first_step():
    run, move = Execution.start(step_count=2, trigger_data={"a": 1}, event="tag.added", first_key="welcome")
    assert run.status is S.QUEUED
    assert run.current_step_index == 0
    assert run.current_step_key == "welcome"
    assert run.context == {
        "event": "tag.added",
        "trigger": {"a": 1},
        "steps": [],
        "step_keys": [],
    }
    assert move.kind is MoveKind.RUN_STEP
    assert move.at is None


def test_start_needs_a_step():
    with pytest.raises(ValueError, match="at least one step"):
        Execution.start(step_count=0, trigger_data={})


@pytest.mark.parametrize(
    ("status", "gate"),
    [
        (S.QUEUED, StepGate.RUN),
        (S.ACTIVE, StepGate.RUN),  # the same job's earlier attempt died mid-step
        (S.PAUSED, StepGate.RELEASE),
        (S.WAITING, StepGate.IGNORE),
        (S.COMPLETED, StepGate.IGNORE),
        (S.FAILED, StepGate.IGNORE),
        (S.CANCELLED, StepGate.IGNORE),
    ],
)
def test_what_a_step_job_may_do(status, gate):
    assert run_at(status).step_job_arrived() is gate


def test_a_successful_step_queues_the_next_one():
    run = run_at(S.QUEUED, context={"steps": []})
    run.begin_step(NOW)
    assert run.status is S.ACTIVE
    assert run.started_at == NOW
    move = run.step_succeeded(NOW, {"ok": True})
    assert run.status is S.QUEUED
    assert run.current_step_index == 1
    assert run.context["steps"] == [{"ok": True}]
    assert move.kind is MoveKind.RUN_STEP
    assert move.at is None


def test_the_last_step_completes_the_run():
    run = run_at(S.ACTIVE, step_count=2, index=1, context={"steps": [{}]})
    move = run.step_succeeded(NOW, {})
    assert run.status is S.COMPLETED
    assert run.completed_at == NOW
    assert move.kind is MoveKind.NOTHING


def test_a_retryable_failure_goes_back_to_queued_with_the_delay():
    run = run_at(S.ACTIVE)
    move = run.step_failed(NOW, error="ServerFailure: 503", category="server_error", retry_delay=30)
    assert run.status is S.QUEUED
    assert run.retry_count == 1
    assert run.attempt_number == 2
    assert run.resume_at == NOW + timedelta(seconds=30)
    assert run.last_error == "ServerFailure: 503"
    assert run.last_error_category == "server_error"
    assert move.kind is MoveKind.RUN_STEP
    assert move.at == NOW + timedelta(seconds=30)
    assert run.current_step_index == 0  # the same step again


def test_a_final_failure_fails_the_run():
    run = run_at(S.ACTIVE, retry_count=2)
    move = run.step_failed(NOW, error="ValidationFailure: 400", category="validation", retry_delay=None)
    assert run.status is S.FAILED
    assert run.completed_at == NOW
    assert move.kind is MoveKind.NOTHING


def test_success_after_retries_resets_the_retry_count():
    run = run_at(S.QUEUED, retry_count=2, resume_at=NOW, context={"steps": []})
    run.begin_step(NOW)
    run.step_succeeded(NOW, {})
    assert run.retry_count == 0
    assert run.resume_at is None


def test_a_deferred_step_is_queued_again_at_its_until_and_spends_no_attempt_nor_visit():
    run = run_at(S.QUEUED, retry_count=1, context={"steps": [{"a": 1}], "step_keys": ["first"]})
    run.begin_step(NOW)
    until = NOW + timedelta(hours=3)
    move = run.step_deferred(NOW, until)
    assert (move.kind, move.at) == (MoveKind.RUN_STEP, until)
    assert (run.status, run.resume_at, run.current_step_index) == (S.QUEUED, until, 0)
    assert run.attempt_number == 2  # the attempt it was on: the deferral was not one
    assert run.context == {"steps": [{"a": 1}], "step_keys": ["first"]}  # no visit, no result
    assert run.last_error == ""


def test_a_step_deferred_to_a_moment_already_past_runs_again_at_once():
    run = run_at(S.ACTIVE)
    move = run.step_deferred(NOW, NOW - timedelta(seconds=1))
    assert (move.kind, move.at, run.resume_at) == (MoveKind.RUN_STEP, None, None)


def test_a_step_deferred_while_paused_waits_for_resume_and_keeps_its_until():
    run = run_at(S.ACTIVE)
    run.pause(NOW)
    until = NOW + timedelta(minutes=30)
    assert run.step_deferred(NOW, until).kind is MoveKind.NOTHING
    assert (run.status, run.paused_from) == (S.PAUSED, S.QUEUED)
    assert run.resume(NOW).at == until


def test_a_step_deferred_after_a_cancel_moves_nothing():
    run = run_at(S.ACTIVE)
    run.cancel(NOW)
    assert run.step_deferred(NOW, NOW + timedelta(hours=1)).kind is MoveKind.NOTHING
    assert run.status is S.CANCELLED


def test_deferring_a_run_not_in_a_step_is_refused():
    with pytest.raises(IllegalExecutionTransition):
        run_at(S.QUEUED).step_deferred(NOW, NOW + timedelta(hours=1))


def test_a_wait_moves_to_waiting_until_its_time():
    run = run_at(S.ACTIVE, context={"steps": []})
    until = NOW + timedelta(hours=2)
    move = run.begin_wait(NOW, until, {"resume_at": until.isoformat()})
    assert run.status is S.WAITING
    assert run.resume_at == until
    assert run.current_step_index == 1  # the wait step is done; the run waits before the next
    assert move.kind is MoveKind.END_WAIT
    assert move.at == until


def test_a_wait_until_a_past_date_goes_straight_on():
    run = run_at(S.ACTIVE, context={"steps": []})
    move = run.begin_wait(NOW, NOW - timedelta(minutes=1), {})
    assert run.status is S.QUEUED
    assert move.kind is MoveKind.RUN_STEP


def test_the_end_of_a_wait_queues_the_next_step():
    run = run_at(S.WAITING, index=1, resume_at=NOW)
    move = run.wait_over(NOW)
    assert run.status is S.QUEUED
    assert run.resume_at is None
    assert move.kind is MoveKind.RUN_STEP


def test_a_wait_that_was_the_last_step_completes_the_run():
    run = run_at(S.WAITING, step_count=2, index=2, resume_at=NOW)
    move = run.wait_over(NOW)
    assert run.status is S.COMPLETED
    assert move.kind is MoveKind.NOTHING


def test_an_early_end_of_wait_job_waits_the_rest():
    later = NOW + timedelta(seconds=5)
    run = run_at(S.WAITING, index=1, resume_at=later)
    move = run.wait_over(NOW)
    assert run.status is S.WAITING
    assert move.kind is MoveKind.END_WAIT
    assert move.at == later


def test_an_end_of_wait_job_for_a_run_not_waiting_is_stale():
    assert run_at(S.PAUSED, paused_from=S.WAITING).wait_over(NOW) is None
    assert run_at(S.CANCELLED).wait_over(NOW) is None


@pytest.mark.parametrize("status", [S.QUEUED, S.ACTIVE, S.WAITING])
def test_pause_remembers_where_the_run_was(status):
    run = run_at(status)
    run.pause(NOW)
    assert run.status is S.PAUSED
    assert run.paused_from is status


@pytest.mark.parametrize("status", [S.PAUSED, S.COMPLETED, S.FAILED, S.CANCELLED])
def test_pause_is_refused_where_it_makes_no_sense(status):
    with pytest.raises(IllegalExecutionTransition) as info:
        run_at(status).pause(NOW)
    assert info.value.current == status.value


def test_resume_of_a_paused_wait_whose_time_passed_continues_at_once():
    run = run_at(S.WAITING, index=1, resume_at=NOW - timedelta(seconds=1))
    run.pause(NOW - timedelta(seconds=10))
    move = run.resume(NOW)
    assert run.status is S.QUEUED
    assert run.resume_at is None
    assert move.kind is MoveKind.RUN_STEP
    assert move.at is None


def test_resume_of_a_paused_wait_before_its_time_waits_the_remainder():
    later = NOW + timedelta(minutes=5)
    run = run_at(S.WAITING, index=1, resume_at=later)
    run.pause(NOW)
    move = run.resume(NOW)
    assert run.status is S.WAITING
    assert move.kind is MoveKind.END_WAIT
    assert move.at == later


def test_resume_of_a_paused_last_wait_whose_time_passed_completes():
    run = run_at(S.WAITING, step_count=1, index=1, resume_at=NOW - timedelta(seconds=1))
    run.pause(NOW)
    move = run.resume(NOW)
    assert run.status is S.COMPLETED
    assert move.kind is MoveKind.NOTHING


def test_resume_of_a_queued_retry_keeps_its_due_time():
    later = NOW + timedelta(seconds=40)
    run = run_at(S.QUEUED, retry_count=1, resume_at=later)
    run.pause(NOW)
    move = run.resume(NOW)
    assert run.status is S.QUEUED
    assert move.at == later


def test_resume_while_the_paused_step_is_still_in_flight_keeps_its_job():
    run = run_at(S.ACTIVE)
    run.pause(NOW)
    move = run.resume(NOW)
    assert run.status is S.ACTIVE
    assert move.kind is MoveKind.KEEP


def test_a_step_that_finishes_while_paused_advances_but_queues_nothing():
    run = run_at(S.ACTIVE, context={"steps": []})
    run.pause(NOW)
    move = run.step_succeeded(NOW, {})
    assert run.status is S.PAUSED
    assert run.current_step_index == 1
    assert run.paused_from is S.QUEUED  # resume queues the next step
    assert move.kind is MoveKind.NOTHING
    assert run.resume(NOW).kind is MoveKind.RUN_STEP


def test_the_last_step_finishing_while_paused_completes_the_run():
    run = run_at(S.ACTIVE, step_count=1, context={"steps": []})
    run.pause(NOW)
    run.step_succeeded(NOW, {})
    assert run.status is S.COMPLETED


def test_a_retryable_failure_while_paused_stays_paused_and_keeps_the_retry_time():
    run = run_at(S.ACTIVE)
    run.pause(NOW)
    move = run.step_failed(NOW, error="e", category="timeout", retry_delay=10)
    assert run.status is S.PAUSED
    assert move.kind is MoveKind.NOTHING
    assert run.retry_count == 1
    assert run.paused_from is S.QUEUED
    assert run.resume(NOW).at == NOW + timedelta(seconds=10)


def test_a_paused_run_lets_go_of_a_step_job_that_died_in_flight():
    run = run_at(S.ACTIVE)
    run.pause(NOW)
    run.release_step()
    assert run.paused_from is S.QUEUED
    assert run.resume(NOW).kind is MoveKind.RUN_STEP


@pytest.mark.parametrize("status", [S.QUEUED, S.ACTIVE, S.WAITING, S.PAUSED])
def test_cancel(status):
    run = run_at(status, resume_at=NOW)
    run.cancel(NOW)
    assert run.status is S.CANCELLED
    assert run.completed_at == NOW
    assert run.resume_at is None


@pytest.mark.parametrize("status", [S.COMPLETED, S.FAILED, S.CANCELLED])
def test_cancel_of_an_ended_run_is_refused(status):
    with pytest.raises(IllegalExecutionTransition):
        run_at(status).cancel(NOW)


def test_a_step_in_flight_when_cancelled_is_logged_but_moves_nothing():
    run = run_at(S.ACTIVE, context={"steps": []})
    run.cancel(NOW)
    assert run.step_succeeded(NOW, {}).kind is MoveKind.NOTHING
    assert run.step_failed(NOW, error="e", category="timeout", retry_delay=5).kind is MoveKind.NOTHING
    assert run.status is S.CANCELLED
    assert run.current_step_index == 0


def test_manual_retry_starts_again_from_the_failed_step():
    run = run_at(S.FAILED, index=2, retry_count=2, completed_at=NOW, last_error="x")
    move = run.retry(NOW)
    assert run.status is S.QUEUED
    assert run.current_step_index == 2
    assert run.retry_count == 0
    assert run.completed_at is None
    assert move.kind is MoveKind.RUN_STEP


@pytest.mark.parametrize("status", [S.QUEUED, S.ACTIVE, S.WAITING, S.PAUSED, S.COMPLETED, S.CANCELLED])
def test_manual_retry_of_a_run_that_did_not_fail_is_refused(status):
    with pytest.raises(IllegalExecutionTransition) as info:
        run_at(status).retry(NOW)
    assert info.value.current == status.value


def test_finishing_a_step_of_a_run_not_in_a_step_is_refused():
    with pytest.raises(IllegalExecutionTransition):
        run_at(S.QUEUED).step_succeeded(NOW, {})
    with pytest.raises(IllegalExecutionTransition):
        run_at(S.COMPLETED).step_failed(NOW, error="e", category="x", retry_delay=None)


@pytest.mark.parametrize("status", [S.QUEUED, S.ACTIVE, S.WAITING, S.PAUSED])
def test_a_run_whose_job_was_lost_fails_where_it_is(status):
    run = run_at(status, index=1, retry_count=1, resume_at=NOW, paused_from=S.ACTIVE if status is S.PAUSED else None)
    assert run.job_lost(NOW, error="StepJobDied: gone", category="unknown") is True
    assert run.status is S.FAILED
    assert (run.last_error, run.last_error_category, run.completed_at) == ("StepJobDied: gone", "unknown", NOW)
    assert run.resume_at is None
    assert run.paused_from is None
    move = run.retry(NOW)
    assert (run.status, run.current_step_index, move.kind) == (S.QUEUED, 1, MoveKind.RUN_STEP)


@pytest.mark.parametrize("status", [S.COMPLETED, S.FAILED, S.CANCELLED])
def test_a_lost_job_of_an_ended_run_changes_nothing(status):
    run = run_at(status, last_error="before")
    assert run.job_lost(NOW, error="StepJobDied: gone", category="unknown") is False
    assert (run.status, run.last_error) == (status, "before")


def test_retrying_a_run_that_failed_at_the_end_of_its_last_wait_completes_it():
    run = run_at(S.WAITING, step_count=2, index=2, resume_at=NOW)
    run.job_lost(NOW, error="StepJobDied: gone", category="unknown")
    move = run.retry(NOW)
    assert run.status is S.COMPLETED
    assert move.kind is MoveKind.NOTHING


# --- the operators' moves: the entity and the bulk moves follow one rule (OPERATOR_MOVES) --------------------
def _accepts(move: str, status: ExecutionStatus) -> bool:
    run = run_at(status, index=1, resume_at=NOW + timedelta(minutes=5))
    try:
        getattr(run, move)(NOW)
    except IllegalExecutionTransition:
        return False
    return True


@pytest.mark.parametrize("move", sorted(OPERATOR_MOVES))
def test_a_state_allows_an_operators_move_exactly_when_the_entity_accepts_it(move):
    assert {status for status in S if _accepts(move, status)} == OPERATOR_MOVES[move]


def test_the_operators_moves_are_those_documented():
    assert {
        "pause": {S.QUEUED, S.ACTIVE, S.WAITING},
        "cancel": {S.QUEUED, S.ACTIVE, S.WAITING, S.PAUSED},
        "resume": {S.PAUSED},
        "retry": {S.FAILED},
    } == OPERATOR_MOVES


def test_a_move_the_state_does_not_allow_names_the_move_and_the_state():
    with pytest.raises(IllegalExecutionTransition, match="cannot resume a run that is queued") as info:
        run_at(S.QUEUED).resume(NOW)
    assert (info.value.current, info.value.target) == ("queued", "paused")
    with pytest.raises(IllegalExecutionTransition, match="cannot retry a run that is completed"):
        run_at(S.COMPLETED).retry(NOW)
