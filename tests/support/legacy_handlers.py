"""A handler module written the way handlers were before the failure classes moved to `kernel.failures`:
it imports them from `jobs.domain.errors`, and the rest from where the README showed it then."""

from typing import Any

from jobs.application.registry import job_handler
from jobs.domain.errors import PermanentError, RateLimited, RetryableError


@job_handler("legacy.outcome")
def outcome(payload: dict[str, Any], job: Any) -> None:
    """Fail the way the payload says, on every attempt before `succeed_on_attempt`."""
    if payload.get("succeed_on_attempt") == job.attempt_number:
        return
    kind = payload.get("kind")
    if kind == "permanent":
        raise PermanentError("not this one")
    if kind == "rate_limited":
        raise RateLimited("slow down", retry_after=3600)
    if kind == "retryable":
        raise RetryableError("try again")
