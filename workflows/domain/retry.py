"""Whether and when a failed step is tried again.

A step's retries are the workflow's own (a step is not retried by the
queue): the error is classified by the queue's one classifier, and the wait
comes from the one backoff formula the queue uses too (kernel.retry.RetryPolicy), with the
workflow's numbers (default 3 attempts, base 60 s, factor 2, jitter 10 %,
capped) and any override in the step's config.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from kernel.failures import ClassifiedError, classify
from kernel.retry import RetryPolicy
from workflows.domain.actions import RetryOverrides


@dataclass(frozen=True)
class StepRetryDecision:
    error: ClassifiedError  # category and the stored `Type: message`
    delay: float | None  # seconds until the next attempt; None: no further attempt
    reason: str  # why, in words, for the log and the run's last error

    @property
    def will_retry(self) -> bool:
        return self.delay is not None


class RetryService:
    def __init__(self, default: RetryPolicy) -> None:
        self.default = default

    def policy_for(self, overrides: RetryOverrides | None = None) -> RetryPolicy:
        if overrides is None:
            return self.default
        changes: dict[str, Any] = {}
        if overrides.max_attempts is not None:
            changes["max_attempts"] = overrides.max_attempts
        if overrides.base_delay is not None:
            changes["base_delay"] = overrides.base_delay
        return dataclasses.replace(self.default, **changes) if changes else self.default

    def decide(
        self,
        *,
        error: BaseException,
        attempt_number: int,
        overrides: RetryOverrides | None = None,
        rng: random.Random | None = None,
    ) -> StepRetryDecision:
        classified = classify(error)
        policy = self.policy_for(overrides)
        decision = policy.decide(attempt_number=attempt_number, error=classified, rng=rng)
        if decision.will_retry:
            return StepRetryDecision(classified, decision.delay, f"attempt {attempt_number} of {policy.max_attempts}")
        if not classified.retryable:
            return StepRetryDecision(classified, None, f"{classified.category} errors are not retried")
        return StepRetryDecision(classified, None, f"gave up after {attempt_number} of {policy.max_attempts} attempts")
