"""The queue's retry policy is the shared kernel's (kernel.retry): one backoff formula for jobs and steps.

Its outcomes are the job states of the same name (tests/unit/jobs/test_retry.py holds them equal), so the
worker writes `decision.status` as the job's state.
"""

from kernel.retry import RetryDecision, RetryOutcome, RetryPolicy

__all__ = ["RetryDecision", "RetryOutcome", "RetryPolicy"]
