"""Compute when the run moves on; the engine keeps it WAITING until then (a `workflow_resume` job)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

from kernel.failures import ValidationFailure
from kernel.local_time import local_instant, next_time_of_day
from workflows.application.actions import ActionResult, StepRun
from workflows.steps.wait.config import WaitConfig, parse_wait_until


class Wait:
    """For a duration; until an instant; until a date-time or date on a clock; until the next time of day on a
    clock. The clock (`time_zone`) is the contact's (its own zone, else its phone number's, else the
    account's), the account's or a named zone; DST is read by kernel.local_time (a time in a gap is the jump,
    a repeated time its first occurrence)."""

    action_type = "wait"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WaitConfig, run.step.config)
        zone: str | None = None
        if config.seconds is not None:
            until = run.now + timedelta(seconds=config.seconds)
        elif config.time_of_day is not None:
            zone = run.clock(config.time_zone)
            until = next_time_of_day(run.now, config.time_of_day, ZoneInfo(zone))
        else:
            text = run.text(config.until or "", "until").strip()
            try:
                moment = parse_wait_until(text)
            except ValueError as exc:
                raise ValidationFailure(f"until: {text[:100]!r} is not an ISO 8601 date or date-time ({exc})") from None
            if moment.tzinfo is not None:
                until = moment
            else:
                zone = run.clock(config.time_zone)
                until = local_instant(moment, ZoneInfo(zone))
        data: dict[str, Any] = {"resume_at": until.isoformat()}
        if zone is not None:
            data["time_zone"] = zone
        return ActionResult(data, wait_until=until)


EXECUTOR = Wait()
