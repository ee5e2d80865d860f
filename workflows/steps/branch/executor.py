"""Take the first branch whose conditions all hold, else the default; the values that chose it are logged, as
the run's history may show them."""

from __future__ import annotations

from typing import Any, cast
from uuid import UUID

from integrations.domain.redaction import REDACTED
from workflows.application.actions import ActionResult, StepRun
from workflows.application.stats import TakenPaths
from workflows.domain.actions import END, ENDED_BY_STEP
from workflows.domain.conditions import Condition, ConditionOp, Facts, all_hold
from workflows.domain.execution import StepOutcome
from workflows.domain.redaction import answer_step
from workflows.infrastructure.models import ExecutionLog
from workflows.steps.branch.config import BranchConfig


class BranchStep:
    """The first branch whose conditions all hold, else the default; the values that chose it are logged."""

    action_type = "branch"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(BranchConfig, run.step.config)
        facts = run.facts([c.field for branch in config.branches for c in branch.conditions])
        values: dict[str, Any] = {}
        taken = None
        for branch in config.branches:
            for condition in branch.conditions:
                values.setdefault(condition.field, condition.lookup(facts))
            if all_hold(branch.conditions, facts):
                taken = branch
                break
        target = taken.next if taken else config.default
        name = taken.name if taken else None
        values = shown_values(run.execution_id, values)
        decision = {"kind": "branch", "branch": name, "default": taken is None, "values": values, "next": target}
        return ActionResult(
            {"branch": name, "default": taken is None, "next": target},
            next_key=target,
            decision=decision,
            end_reason=ENDED_BY_STEP if target == END else "",
        )


def shown_values(execution_id: UUID, values: dict[str, Any]) -> dict[str, Any]:
    """The values a decision logs, as the run's history may show them: a value read from a step's answer
    (`steps.<key>.body...`, which conditions read as the receiver sent it) is logged as that step's log row
    shows it, so a decision never shows what the row hides (`[redacted]` where the row has no such value)."""
    answer_fields = [f for f in values if answer_step(f) is not None]
    if not answer_fields:
        return values
    keys = {answer_step(f) for f in answer_fields}
    shown_rows = (
        ExecutionLog.objects.filter(execution_id=execution_id, step_key__in=keys, outcome=StepOutcome.SUCCEEDED)
        .order_by("id")
        .values_list("step_key", "response_data")
    )
    shown = Facts(contact={}, steps=dict(shown_rows))  # a step visited twice: its latest row, as conditions read
    return {
        field: _as_shown(Condition(field, ConditionOp.EXISTS).lookup(shown), value) if field in answer_fields else value
        for field, value in values.items()
    }


def _as_shown(shown: Any, value: Any) -> Any:
    return shown if shown is not None or value is None else REDACTED


EXECUTOR = BranchStep()
# The statistics count runs per branch taken ("the default" when none held).
PATHS = TakenPaths(
    kind="branch",
    keys=("branch",),
    words=lambda d: f"“{d['branch']}”" if d["branch"] else "the default (no branch held)",
)
