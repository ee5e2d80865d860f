"""Backoff bounds, the cap, jitter that never lengthens a wait, and the retry decision."""

import random

import pytest

from jobs.domain.retry import RetryPolicy
from jobs.domain.states import JobStatus
from kernel.failures import (
    AuthFailure,
    RateLimited,
    ServerFailure,
    ValidationFailure,
    classify,
)

POLICY = RetryPolicy(max_attempts=4, base_delay=60, max_delay=3600, jitter=0.25)


@pytest.mark.parametrize(
    ("retry_number", "longest"),
    [(1, 60), (2, 120), (3, 240), (4, 480), (5, 960), (6, 1920), (7, 3600), (8, 3600), (60, 3600), (10_000, 3600)],
)
def test_each_retry_waits_base_times_two_to_the_n_minus_one_capped(retry_number, longest):
    shortest, upper = POLICY.backoff_bounds(retry_number)
    assert upper == longest
    assert shortest == pytest.approx(longest * 0.75)


@pytest.mark.parametrize("retry_number", range(1, 12))
def test_jitter_only_shortens_and_never_passes_the_cap(retry_number):
    rng = random.Random(retry_number)
    shortest, longest = POLICY.backoff_bounds(retry_number)
    delays = [POLICY.next_delay(retry_number, rng) for _ in range(2000)]
    assert min(delays) >= shortest
    assert max(delays) <= longest <= POLICY.max_delay
    # the jitter is really used: waits spread over most of the allowed range
    assert max(delays) - min(delays) > 0.8 * (longest - shortest)


def test_no_jitter_gives_the_exact_formula():
    policy = RetryPolicy(max_attempts=5, base_delay=2, max_delay=100, jitter=0)
    assert [policy.next_delay(n) for n in (1, 2, 3, 4, 5, 6, 7, 8)] == [2, 4, 8, 16, 32, 64, 100, 100]


def test_retry_number_starts_at_one():
    with pytest.raises(ValueError, match="starts at 1"):
        POLICY.next_delay(0)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"max_attempts": 0, "base_delay": 1, "max_delay": 1}, "max_attempts"),
        ({"max_attempts": 1, "base_delay": -1, "max_delay": 1}, "delays"),
        ({"max_attempts": 1, "base_delay": 1, "max_delay": 1, "jitter": 1.5}, "jitter"),
        ({"max_attempts": 1, "base_delay": 1, "max_delay": 1, "factor": 0.5}, "factor"),
    ],
)
def test_nonsense_policies_are_refused(kwargs, reason):
    with pytest.raises(ValueError, match=reason):
        RetryPolicy(**kwargs)


def test_retryable_failure_with_attempts_left_is_retried_after_the_backoff():
    decision = POLICY.decide(attempt_number=2, error=classify(ServerFailure("503")), rng=random.Random(1))
    assert decision.status == JobStatus.RETRYING
    low, high = POLICY.backoff_bounds(2)
    assert low <= decision.delay <= high


def test_last_attempt_goes_dead():
    decision = POLICY.decide(attempt_number=4, error=classify(ServerFailure("503")))
    assert decision.status == JobStatus.DEAD
    assert decision.delay is None


def test_the_jobs_own_max_attempts_wins_over_the_policy():
    assert POLICY.decide(attempt_number=2, error=classify(TimeoutError()), max_attempts=2).status == JobStatus.DEAD
    assert POLICY.decide(attempt_number=5, error=classify(TimeoutError()), max_attempts=9).will_retry


@pytest.mark.parametrize("exc", [ValidationFailure("400"), AuthFailure("401")])
def test_permanent_errors_fail_at_once(exc):
    decision = POLICY.decide(attempt_number=1, error=classify(exc))
    assert decision.status == JobStatus.FAILED


def test_unclassified_errors_are_retried():
    assert POLICY.decide(attempt_number=1, error=classify(KeyError("x"))).will_retry


def test_retry_after_wins_over_the_formula():
    decision = POLICY.decide(attempt_number=1, error=classify(RateLimited("slow down", retry_after=7)))
    assert decision.delay == 7


def test_retry_after_is_capped():
    decision = POLICY.decide(attempt_number=1, error=classify(RateLimited("slow down", retry_after=99999)))
    assert decision.delay == POLICY.max_delay


def test_rate_limit_without_retry_after_uses_the_formula():
    decision = POLICY.decide(attempt_number=3, error=classify(RateLimited("slow down")), rng=random.Random(3))
    low, high = POLICY.backoff_bounds(3)
    assert low <= decision.delay <= high


def test_every_retry_outcome_is_the_job_state_of_the_same_name():
    from jobs.domain.retry import RetryOutcome

    assert {JobStatus(outcome.value) for outcome in RetryOutcome} == {
        JobStatus.RETRYING,
        JobStatus.FAILED,
        JobStatus.DEAD,
    }
    assert all(JobStatus(outcome.value) == outcome for outcome in RetryOutcome)
