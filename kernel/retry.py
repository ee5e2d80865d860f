"""When to try again: exponential backoff with jitter, and the retry decision.

The n-th retry waits min(cap, base * factor^(n-1)), shortened by a random
share of up to `jitter` (so jitter never lengthens a wait and never passes
the cap). A rate limit's Retry-After wins over the formula, up to the cap.
The queue (jobs.domain.retry) and the workflow engine (workflows.domain.retry)
use this one policy with their own numbers, so it is shared kernel: its
outcomes are named as the queue's job states are, and equal to them.
"""

import random
from dataclasses import dataclass
from enum import StrEnum

from kernel.failures import ClassifiedError


class RetryOutcome(StrEnum):
    """What a failure leads to; each value is the job state of the same name (jobs.domain.states)."""

    RETRYING = "retrying"  # a passing failure with attempts left: try again after the delay
    FAILED = "failed"  # a permanent failure: trying again would not help
    DEAD = "dead"  # attempts exhausted


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int  # the first attempt counts: max_attempts = retries + 1
    base_delay: float  # seconds before the first retry
    max_delay: float  # the cap
    jitter: float = 0.25  # 0..1: share of the wait that may be cut at random
    factor: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")
        if self.factor < 1:
            raise ValueError("factor must be at least 1")

    def backoff_bounds(self, retry_number: int) -> tuple[float, float]:
        """The shortest and longest wait before the n-th retry (n >= 1)."""
        if retry_number < 1:
            raise ValueError("retry_number starts at 1")
        exponent = min(retry_number - 1, 64)  # beyond this the cap has long won
        longest = min(self.max_delay, self.base_delay * self.factor**exponent)
        return longest * (1 - self.jitter), longest

    def next_delay(self, retry_number: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before the n-th retry."""
        shortest, longest = self.backoff_bounds(retry_number)
        share = (rng or random).random()
        return longest - (longest - shortest) * share

    def delay_for(self, retry_number: int, error: ClassifiedError, rng: random.Random | None = None) -> float:
        if error.retry_after is not None:
            return max(0.0, min(float(error.retry_after), self.max_delay))
        return self.next_delay(retry_number, rng)

    def decide(
        self,
        *,
        attempt_number: int,
        error: ClassifiedError,
        max_attempts: int | None = None,
        rng: random.Random | None = None,
    ) -> "RetryDecision":
        """What follows the failure of attempt `attempt_number` (1-based).

        `max_attempts` overrides the policy's: a job carries the number it was queued with.
        """
        if not error.retryable:
            return RetryDecision(RetryOutcome.FAILED, None)
        if attempt_number >= (max_attempts or self.max_attempts):
            return RetryDecision(RetryOutcome.DEAD, None)
        return RetryDecision(RetryOutcome.RETRYING, self.delay_for(attempt_number, error, rng))


@dataclass(frozen=True)
class RetryDecision:
    status: RetryOutcome
    delay: float | None  # seconds until the next attempt, when RETRYING

    @property
    def will_retry(self) -> bool:
        return self.status is RetryOutcome.RETRYING
