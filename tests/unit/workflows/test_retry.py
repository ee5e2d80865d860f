"""RetryService: the queue's classifier and backoff formula, with the workflow's numbers and a step's overrides."""

import random

import pytest

from jobs.domain.retry import RetryPolicy
from kernel.failures import (
    AuthFailure,
    NetworkFailure,
    RateLimited,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
)
from workflows.domain.actions import RetryOverrides
from workflows.domain.retry import RetryService

# The defaults: 3 attempts, base 60 s, factor 2, jitter 10 %.
DEFAULT = RetryPolicy(max_attempts=3, base_delay=60, max_delay=3600, jitter=0.1)


@pytest.fixture
def service():
    return RetryService(DEFAULT)


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (TimeoutFailure("slow"), "timeout"),
        (RateLimited("busy"), "rate_limit"),
        (ServerFailure("503"), "server_error"),
        (NetworkFailure("refused"), "network"),
        (ConnectionResetError("reset"), "network"),
        (TimeoutError("timed out"), "timeout"),
        (RuntimeError("surprise"), "unknown"),
    ],
)
def test_passing_failures_are_retried(service, error, category):
    decision = service.decide(error=error, attempt_number=1)
    assert decision.will_retry
    assert decision.error.category == category
    assert 54 <= decision.delay <= 60  # base 60 s, cut by at most 10 %


@pytest.mark.parametrize(
    ("error", "category"), [(ValidationFailure("400"), "validation"), (AuthFailure("401"), "auth")]
)
def test_validation_and_auth_failures_are_permanent(service, error, category):
    decision = service.decide(error=error, attempt_number=1)
    assert not decision.will_retry
    assert decision.delay is None
    assert decision.error.category == category
    assert "not retried" in decision.reason


def test_backoff_doubles_with_ten_percent_jitter(service):
    rng = random.Random(7)
    first = service.decide(error=ServerFailure("x"), attempt_number=1, rng=rng).delay
    second = service.decide(error=ServerFailure("x"), attempt_number=2, rng=rng).delay
    assert 54 <= first <= 60
    assert 108 <= second <= 120


def test_attempts_run_out_after_three(service):
    decision = service.decide(error=ServerFailure("503"), attempt_number=3)
    assert not decision.will_retry
    assert decision.reason == "gave up after 3 of 3 attempts"


def test_a_step_may_override_attempts_and_base_delay(service):
    overrides = RetryOverrides(max_attempts=5, base_delay=0.5)
    decision = service.decide(error=ServerFailure("x"), attempt_number=3, overrides=overrides)
    assert decision.will_retry
    assert 1.8 <= decision.delay <= 2.0  # 0.5 * 2^2, cut by at most 10 %
    assert not service.decide(error=ServerFailure("x"), attempt_number=5, overrides=overrides).will_retry


def test_one_attempt_means_no_retry(service):
    decision = service.decide(error=TimeoutFailure("x"), attempt_number=1, overrides=RetryOverrides(max_attempts=1))
    assert not decision.will_retry


def test_retry_after_wins_over_the_formula(service):
    decision = service.decide(error=RateLimited("429", retry_after=7), attempt_number=1)
    assert decision.delay == 7


def test_retry_after_is_capped_at_the_backoff_cap():
    capped = RetryService(RetryPolicy(max_attempts=3, base_delay=60, max_delay=120, jitter=0.1))
    assert capped.decide(error=RateLimited("429", retry_after=86400), attempt_number=1).delay == 120


def test_the_stored_error_follows_the_queue_rule(service):
    decision = service.decide(
        error=ServerFailure("answered 503 at https://hooks.example.com/t/SECRET?x=1"), attempt_number=1
    )
    assert decision.error.message == "ServerFailure: answered 503 at https://hooks.example.com"
    assert "SECRET" not in decision.error.message


def test_no_overrides_is_the_default_policy(service):
    assert service.policy_for(None) is DEFAULT
    assert service.policy_for(RetryOverrides()) is DEFAULT
