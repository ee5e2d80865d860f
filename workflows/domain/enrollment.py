"""May this contact enter this workflow now? The one gate every way in passes.

Four checks, in this order; the first that fails is the refusal and says why:

1. active: only an active, published workflow takes new runs;
2. chain: a run's own steps never restart its workflow, and no chain of runs
   started by one another grows deeper than the limit (the loop guard);
3. re-enrollment: the workflow's rule, against the contact's earlier runs of it;
4. limit: the account's runs in progress (QUEUED or ACTIVE) are below its limit.

Each way in maps a refusal to what it does (`workflows.application.runs.starting`):
`start_run` raises it; `start_runs` skips a contact the re-enrollment rule
keeps out and refuses the whole call for any other check; an event skips the
workflow and reports why (a workflow no longer active, seen through a stale
cache, is left out without a report). The facts are read by the caller under
the account's lock, so the answer is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID

from workflows.domain.errors import (
    ConcurrentExecutionLimitError,
    EnrollmentRefused,
    WorkflowDomainError,
    WorkflowNotActive,
)
from workflows.domain.triggers import Reenrollment
from workflows.domain.workflow import WorkflowStatus


class Check(StrEnum):
    """Which check of the gate refused."""

    ACTIVE = "active"
    CHAIN = "chain"
    REENROLLMENT = "reenrollment"
    LIMIT = "limit"


@dataclass(frozen=True)
class Refusal:
    check: Check
    error: WorkflowDomainError  # what a way in that refuses raises (each maps to its HTTP status)

    @property
    def reason(self) -> str:
        return str(self.error)


@dataclass(frozen=True)
class History:
    """The contact's earlier runs of the workflow, as far as re-enrollment cares."""

    has_any_run: bool = False
    has_unfinished_run: bool = False


NO_RUNS = History()


@dataclass(frozen=True)
class ChainOrigin:
    """The run whose step caused an event. Runs started by that event are its children."""

    execution_id: UUID
    workflow_id: int
    depth: int  # 0 for a run started by a person, an API call, or an outside event


def enrollment_gate(
    *,
    workflow_id: int,
    status: str,
    reenrollment: Reenrollment | None,
    origin: ChainOrigin | None,
    max_chain_depth: int,
    history: History,
    in_progress: int,
    limit: int,
    starting: int = 0,
) -> Refusal | None:
    """Why this contact may not enter the workflow now, or None when it may.

    `reenrollment` is the current version's rule (None: the workflow was never published); `history`
    need only be read when `reads_history(reenrollment)`. `starting`: runs the same call starts before
    this one (a list enrolled at once counts against the limit as a whole).
    """
    if status != WorkflowStatus.ACTIVE or reenrollment is None:
        return Refusal(
            Check.ACTIVE,
            WorkflowNotActive(
                f"workflow {workflow_id} is {status}; only an active (published) workflow takes new runs"
            ),
        )
    reason = chain_refusal(origin, workflow_id=workflow_id, max_depth=max_chain_depth)
    if reason:
        return Refusal(Check.CHAIN, EnrollmentRefused(reason))
    reason = reenrollment_refusal(
        reenrollment, has_unfinished_run=history.has_unfinished_run, has_any_run=history.has_any_run
    )
    if reason:
        return Refusal(Check.REENROLLMENT, EnrollmentRefused(reason))
    if in_progress + starting >= limit:
        return Refusal(Check.LIMIT, ConcurrentExecutionLimitError(limit, in_progress))
    return None


def reads_history(rule: Reenrollment | None) -> bool:
    """Whether the rule looks at the contact's earlier runs (else the caller need not read them)."""
    return rule is not None and rule is not Reenrollment.ALWAYS


# --- re-enrollment ---------------------------------------------------------------------------
def reenrollment_refusal(rule: Reenrollment, *, has_unfinished_run: bool, has_any_run: bool) -> str | None:
    """Why this contact may not enter the workflow again, or None when it may."""
    if rule is Reenrollment.NEVER and has_any_run:
        return "the contact was already enrolled in this workflow (re-enrollment: never)"
    if rule is Reenrollment.AFTER_FINISH and has_unfinished_run:
        return "the contact has a run of this workflow in progress (re-enrollment: after_finish)"
    return None


# --- the chain guard ------------------------------------------------------------------------
def chain_refusal(origin: ChainOrigin | None, *, workflow_id: int, max_depth: int) -> str | None:
    """Why an event caused by a run's step may not start `workflow_id`, or None.

    Workflows chain (a step adds a tag, the tag starts another workflow), but a
    chain must end: a run never restarts its own workflow through its own
    steps, and no chain grows deeper than `max_depth` runs.
    """
    if origin is None:
        return None
    if origin.workflow_id == workflow_id:
        return "a run's own steps never restart its workflow (loop guard)"
    if origin.depth + 1 > max_depth:
        return f"the chain of workflows started by one another is deeper than {max_depth} (loop guard)"
    return None
