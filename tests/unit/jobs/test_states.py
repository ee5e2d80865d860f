"""Every allowed and every forbidden move of the job state machine."""

import datetime as dt
import itertools

import pytest

from jobs.domain.states import (
    DEAD_LETTERS,
    FINISHED_STATES,
    GAVE_UP,
    MANUALLY_RETRYABLE,
    TRANSITIONS,
    IllegalJobTransition,
    JobStatus,
    check_cancel,
    check_manual_retry,
    failure_rate,
    pushed_expiry,
    transition,
)

ALLOWED = {
    (JobStatus.PENDING, JobStatus.RUNNING),
    (JobStatus.PENDING, JobStatus.CANCELLED),
    (JobStatus.RUNNING, JobStatus.COMPLETED),
    (JobStatus.RUNNING, JobStatus.RETRYING),
    (JobStatus.RUNNING, JobStatus.FAILED),
    (JobStatus.RUNNING, JobStatus.DEAD),
    (JobStatus.RUNNING, JobStatus.PENDING),
    (JobStatus.RETRYING, JobStatus.RUNNING),
    (JobStatus.RETRYING, JobStatus.CANCELLED),
    (JobStatus.RETRYING, JobStatus.PENDING),
    (JobStatus.FAILED, JobStatus.PENDING),
    (JobStatus.DEAD, JobStatus.PENDING),
}
ALL_PAIRS = list(itertools.product(JobStatus, JobStatus))


def test_the_table_is_exactly_the_documented_moves():
    table = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert table == ALLOWED


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED))
def test_allowed_move(current, target):
    assert transition(current, target) is target


@pytest.mark.parametrize(("current", "target"), [p for p in ALL_PAIRS if p not in ALLOWED])
def test_forbidden_move(current, target):
    with pytest.raises(IllegalJobTransition) as raised:
        transition(current, target)
    assert raised.value.current is current
    assert str(current) in str(raised.value)


@pytest.mark.parametrize("status", list(JobStatus))
def test_cancel_only_pending_or_retrying(status):
    if status in (JobStatus.PENDING, JobStatus.RETRYING):
        assert check_cancel(status) is JobStatus.CANCELLED
    else:
        with pytest.raises(IllegalJobTransition, match=f"cannot cancel a job that is {status}"):
            check_cancel(status)


@pytest.mark.parametrize("status", list(JobStatus))
def test_manual_retry_only_dead_failed_or_retrying(status):
    if status in (JobStatus.DEAD, JobStatus.FAILED, JobStatus.RETRYING):
        assert check_manual_retry(status) is JobStatus.PENDING
    else:
        with pytest.raises(IllegalJobTransition, match=f"cannot retry a job that is {status}"):
            check_manual_retry(status)


# --- the failure rate: one formula for the jobs API, the dashboard and the runs beside them ---------------
@pytest.mark.parametrize(
    ("completed", "failed", "dead", "rate"),
    [
        (0, 0, 0, None),  # nothing finished: no rate, not a reassuring 0 %
        (3, 0, 0, 0.0),
        (0, 1, 0, 1.0),
        (0, 0, 2, 1.0),
        (6, 1, 1, 0.25),  # (failed + dead) / (completed + failed + dead)
    ],
)
def test_the_failure_rate_counts_failed_and_dead_against_everything_that_finished(completed, failed, dead, rate):
    assert failure_rate(completed=completed, failed=failed, dead=dead) == rate


def test_dead_letters_are_the_jobs_that_ended_without_their_work_done():
    assert {JobStatus.DEAD, JobStatus.FAILED} == GAVE_UP
    assert GAVE_UP <= MANUALLY_RETRYABLE  # an operator may always retry what the queue gave up on
    assert {JobStatus.DEAD, JobStatus.FAILED, JobStatus.CANCELLED} == DEAD_LETTERS  # seed 003
    assert DEAD_LETTERS <= FINISHED_STATES


def test_the_pushed_deadline_rule():
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    minute = dt.timedelta(minutes=1)
    assert pushed_expiry(None, t0, t0 + minute) is None
    assert pushed_expiry(t0 + 5 * minute, t0, t0 + 60 * minute) == t0 + 65 * minute
    assert pushed_expiry(t0 + 5 * minute, t0, t0 + dt.timedelta(seconds=1)) == t0 + 5 * minute + dt.timedelta(seconds=1)
    assert pushed_expiry(t0 + 5 * minute, t0, t0 - minute) == t0 + 5 * minute  # never earlier
    assert pushed_expiry(t0, t0, t0 + minute) == t0 + minute + dt.timedelta(seconds=1)  # at least a second
