"""End the run: COMPLETED, "ended by step"."""

from __future__ import annotations

from workflows.application.actions import ActionResult, StepRun
from workflows.domain.actions import END, ENDED_BY_STEP


class EndStep:
    action_type = "end"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        return ActionResult({"ended": True}, next_key=END, decision={"kind": "end"}, end_reason=ENDED_BY_STEP)


EXECUTOR = EndStep()
