"""Take the path the run's bucket falls in (a hash of the run id: a retry or a crash keeps the path)."""

from __future__ import annotations

from typing import cast

from workflows.application.actions import ActionResult, StepRun
from workflows.application.stats import TakenPaths
from workflows.domain.actions import END, ENDED_BY_STEP
from workflows.steps.split.config import SplitConfig, split_bucket


class SplitStep:
    """A weighted path by the run's bucket: a hash of the run id, so a retry or a crash keeps the path."""

    action_type = "split"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(SplitConfig, run.step.config)
        bucket = split_bucket(run.execution_id, run.step.key)
        path = config.path_for(bucket)
        decision = {"kind": "split", "bucket": bucket, "path": path.name, "next": path.next}
        return ActionResult(
            {"bucket": bucket, "path": path.name, "next": path.next},
            next_key=path.next,
            decision=decision,
            end_reason=ENDED_BY_STEP if path.next == END else "",
        )


EXECUTOR = SplitStep()
PATHS = TakenPaths(kind="split", keys=("path",), words=lambda d: f"path “{d['path']}”")  # runs per path, counted
