"""A step that may not act yet: deferred until a moment, for a reason a marketer reads (issue 23 section 5).

The sending rules (`integrations.domain.sending`) answer a message with `Defer(until, reason, rule)` when a send
window is closed or a frequency cap is reached, and the door (`integrations.application.outbound`) passes that on
as `Deferred`. A step that gets it returns `ActionResult(deferred=Deferral(...))`; the engine, not the step type,
makes it an outcome of its own (`StepOutcome.DEFERRED`): the run waits, QUEUED, until `until`, then asks again,
and neither an attempt nor a visit of the step is spent (docs/decisions/deferral-and-snooze.md).

Plain Python: the domain imports no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

DEFERRED_UNTIL = "deferred_until"  # the log row's keys (response_data): what the timeline and the API show
REASON = "reason"
RULE = "rule"


@dataclass(frozen=True)
class Deferral:
    """Not now: ask again at `until` (an aware instant, the database's clock), because of `rule`.

    `reason` is shown as it is: the rule's own words, with the time already in the contact's zone ("waiting
    for the send window (opens Tue 09:00 Europe/Paris)"). `rule` is short and stable ("send_window",
    "frequency_cap"), for statistics and filters.
    """

    until: datetime
    reason: str
    rule: str

    def __post_init__(self) -> None:
        if self.until.tzinfo is None:
            raise ValueError("a deferral's until must be an aware datetime")

    def log_data(self) -> dict[str, Any]:
        """What the step's log row keeps of it."""
        return {DEFERRED_UNTIL: self.until.isoformat(), REASON: self.reason, RULE: self.rule}

    @classmethod
    def from_verdict(cls, verdict: Any) -> Deferral:
        """From the sending rules' `Defer` or the door's `Deferred` (anything with until, reason and rule, a rule
        an enum or its value): the one conversion a sending step needs."""
        rule = getattr(verdict.rule, "value", verdict.rule)
        return cls(until=verdict.until, reason=str(verdict.reason), rule=str(rule))


def deferral_sentence(log_data: Any) -> str:
    """The timeline's words for a deferred attempt, from its log row's data: the rule's reason as it is."""
    if not isinstance(log_data, dict):
        return ""
    reason = log_data.get(REASON)
    return str(reason) if reason else "deferred"
