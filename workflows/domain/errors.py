"""The workflow engine's domain errors. Plain exceptions; the API maps each to one HTTP status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kernel.failures import PermanentError


class WorkflowDomainError(Exception):
    """Base of every error the workflow engine raises on purpose."""


@dataclass(frozen=True)
class FieldError:
    """One problem with input: `path` names where (`steps[2].config.url`), `reason` says why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class WorkflowValidationError(WorkflowDomainError):
    """A workflow (or a run's input) that cannot be accepted; every problem found is listed (HTTP 400)."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: list[FieldError] = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors) or "invalid")

    @classmethod
    def single(cls, path: str, reason: str) -> WorkflowValidationError:
        return cls([FieldError(path, reason)])

    def as_dict(self) -> dict[str, list[str]]:
        """Errors grouped by path, the shape DRF and Django forms use."""
        grouped: dict[str, list[str]] = {}
        for error in self.errors:
            grouped.setdefault(error.path, []).append(error.reason)
        return grouped


class IllegalExecutionTransition(WorkflowDomainError):
    """A move the run's transition table does not allow (HTTP 409). Carries the run's current state."""

    def __init__(self, current: str, target: str, action: str | None = None) -> None:
        self.current = current
        self.target = target
        self.action = action or f"move to {target}"
        super().__init__(f"cannot {self.action} a run that is {current}")


class IllegalWorkflowTransition(WorkflowDomainError):
    """A workflow status change that is not allowed (HTTP 409)."""

    def __init__(self, current: str, action: str, reason: str = "") -> None:
        self.current = current
        self.action = action
        super().__init__(f"cannot {action} a workflow that is {current}" + (f": {reason}" if reason else ""))


class ConcurrentExecutionLimitError(WorkflowDomainError):
    """The account already has its limit of runs QUEUED or ACTIVE (HTTP 429). Nothing was stored."""

    def __init__(self, limit: int, in_progress: int) -> None:
        self.limit = limit
        self.in_progress = in_progress
        super().__init__(
            f"the account already has {in_progress} runs queued or active (its limit is {limit}); "
            "try again when some have finished"
        )


class EnrollmentRefused(WorkflowDomainError):
    """The workflow's re-enrollment rule (or the chain guard) keeps this contact out (HTTP 409)."""


class WorkflowNotActive(WorkflowDomainError):
    """Only an active (published, not paused or archived) workflow takes new runs (HTTP 409)."""


class IdempotencyConflict(WorkflowDomainError):
    """The idempotency key was already used for a run of another workflow or contact (HTTP 409)."""


class PublishedVersionImmutable(WorkflowDomainError):
    """A published version is never changed: runs started on it, and workers cache it by id for good."""


class OutcomeNotStored(PermanentError):
    """The database refused to record a step's outcome (e.g. data it cannot hold): the step fails without it.

    Permanent: the action already took effect, and recording the same outcome again would be refused again.
    """
