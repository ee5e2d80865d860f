"""The enrollment gate: one decision for every way into a workflow, and the rules it weighs."""

import uuid

import pytest

from workflows.domain.enrollment import (
    NO_RUNS,
    ChainOrigin,
    Check,
    History,
    chain_refusal,
    enrollment_gate,
    reads_history,
    reenrollment_refusal,
)
from workflows.domain.errors import ConcurrentExecutionLimitError, EnrollmentRefused, WorkflowNotActive
from workflows.domain.triggers import Reenrollment

OPEN = {
    "workflow_id": 7,
    "status": "active",
    "reenrollment": Reenrollment.NEVER,
    "origin": None,
    "max_chain_depth": 10,
    "history": NO_RUNS,
    "in_progress": 0,
    "limit": 100,
}


def gate(**changes):
    return enrollment_gate(**{**OPEN, **changes})


def test_a_contact_enters_an_active_workflow_with_room_and_no_earlier_run():
    assert gate() is None


@pytest.mark.parametrize(
    ("changes", "check"),
    [
        ({"status": "paused"}, Check.ACTIVE),
        ({"status": "draft", "reenrollment": None}, Check.ACTIVE),
        ({"reenrollment": None}, Check.ACTIVE),  # active, but no version was ever published
        ({"origin": ChainOrigin(uuid.uuid4(), workflow_id=7, depth=0)}, Check.CHAIN),
        ({"origin": ChainOrigin(uuid.uuid4(), workflow_id=8, depth=10)}, Check.CHAIN),
        ({"history": History(has_any_run=True)}, Check.REENROLLMENT),
        ({"in_progress": 100}, Check.LIMIT),
        ({"in_progress": 99, "starting": 1}, Check.LIMIT),
    ],
)
def test_each_check_refuses_with_its_reason(changes, check):
    refusal = gate(**changes)
    assert refusal is not None
    assert refusal.check is check
    assert refusal.reason == str(refusal.error)


def test_the_first_failing_check_wins():
    """Active, then the chain guard, then re-enrollment, then the limit: every way in sees the same reason."""
    everything = {
        "origin": ChainOrigin(uuid.uuid4(), workflow_id=7, depth=0),
        "history": History(has_any_run=True),
        "in_progress": 500,
    }
    assert gate(status="paused", **everything).check is Check.ACTIVE
    assert gate(**everything).check is Check.CHAIN
    assert gate(**{**everything, "origin": None}).check is Check.REENROLLMENT
    assert gate(in_progress=500).check is Check.LIMIT


def test_each_refusal_carries_the_error_a_refusing_caller_raises():
    not_active = gate(status="archived")
    assert isinstance(not_active.error, WorkflowNotActive)
    assert str(not_active.error) == "workflow 7 is archived; only an active (published) workflow takes new runs"
    assert isinstance(gate(history=History(has_any_run=True)).error, EnrollmentRefused)
    full = gate(in_progress=95, limit=100, starting=5)
    assert isinstance(full.error, ConcurrentExecutionLimitError)
    # The limit error reports the runs in progress, not those this same call was about to start.
    assert (full.error.limit, full.error.in_progress) == (100, 95)


def test_a_list_counts_against_the_limit_as_a_whole():
    assert gate(in_progress=97, limit=100, starting=2) is None
    assert gate(in_progress=97, limit=100, starting=3).check is Check.LIMIT


def test_only_a_rule_that_looks_back_needs_the_history():
    assert reads_history(Reenrollment.NEVER)
    assert reads_history(Reenrollment.AFTER_FINISH)
    assert not reads_history(Reenrollment.ALWAYS)
    assert not reads_history(None)
    assert gate(reenrollment=Reenrollment.ALWAYS, history=History(True, True)) is None


@pytest.mark.parametrize(
    ("rule", "unfinished", "any_run", "refused"),
    [
        (Reenrollment.NEVER, False, False, False),
        (Reenrollment.NEVER, False, True, True),
        (Reenrollment.NEVER, True, True, True),
        (Reenrollment.AFTER_FINISH, False, True, False),
        (Reenrollment.AFTER_FINISH, True, True, True),
        (Reenrollment.ALWAYS, True, True, False),
    ],
)
def test_reenrollment(rule, unfinished, any_run, refused):
    reason = reenrollment_refusal(rule, has_unfinished_run=unfinished, has_any_run=any_run)
    assert (reason is not None) is refused
    if refused:
        assert rule.value in reason


def test_the_chain_guard():
    origin = ChainOrigin(execution_id=uuid.uuid4(), workflow_id=1, depth=2)
    assert chain_refusal(None, workflow_id=1, max_depth=3) is None  # not caused by a run
    assert "own steps never restart" in chain_refusal(origin, workflow_id=1, max_depth=10)
    assert chain_refusal(origin, workflow_id=2, max_depth=3) is None  # depth 3 is allowed
    assert "deeper than 2" in chain_refusal(origin, workflow_id=2, max_depth=2)
