"""Waiting for an event: which event a waiting run accepts, and which of event and timeout wins.

A `wait_for_event` step keeps the run on that step, WAITING, until an event
of the name it waits for happens to the run's contact and its `match`
accepts it, or until the timeout. Plain rules, no Django:

- `event_matches`: does this event satisfy the wait (the CONTRACT's `match`
  per event; a custom event's `conditions` in the one condition language)?
- `resolve`: given what the wait store holds (an event recorded on the wait,
  or none) and the time, the outcome: the event (the "happened" path, the
  step's `next`), the timeout (`on_timeout`), or not yet.

The race between an event and the timeout is decided once, by the wait's
row: an event is recorded on it only while no event is recorded and only if
it happened before the timeout; whoever resolves the wait (under the run's
lock) reads that row, so exactly one of them wins and the log says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflows.domain.conditions import EVENT_ROOTS, Condition, ConditionOp, Facts, parse_conditions

TAG_EVENTS = ("tag.added", "tag.removed")
ENGAGEMENT = ("email.opened", "email.clicked")


@dataclass(frozen=True)
class EventWait:
    """A step config that keeps the run WAITING on its step until an event or a timeout (the engine's event
    waits, `runs.waiting`, serve any step whose config is one: today `wait_for_event`'s)."""

    event: str
    match: Any  # checked per event (`event_matches`)
    timeout: float  # seconds
    on_timeout: str  # a step key, or END


@dataclass(frozen=True)
class RecordedEvent:
    """The event a wait got, as the wait store keeps it."""

    id: str
    at: datetime
    data: Mapping[str, Any]


@dataclass(frozen=True)
class WaitOutcome:
    """How a wait ended: `happened` (the event: its `next`) or not (the timeout: `on_timeout`)."""

    happened: bool
    event: RecordedEvent | None = None

    def decision(self) -> dict[str, Any]:
        """The log row's decision (CONTRACT: {"kind": "event", "event_id", "at"} or {"kind": "timeout"})."""
        if self.event is None:
            return {"kind": "timeout"}
        return {"kind": "event", "event_id": self.event.id, "at": self.event.at.isoformat()}

    def result(self) -> dict[str, Any]:
        """What the step produced, for later conditions (`steps.<key>.happened`, `steps.<key>.event`)."""
        if self.event is None:
            return {"happened": False, "timed_out": True}
        return {"happened": True, "timed_out": False, "event": dict(self.event.data), "event_id": self.event.id}


def resolve(recorded: RecordedEvent | None, timeout_at: datetime, now: datetime) -> WaitOutcome | None:
    """The wait's outcome now; None: neither happened yet (wait on until `timeout_at`)."""
    if recorded is not None:
        return WaitOutcome(happened=True, event=recorded)  # recorded only if it came before the timeout
    if now >= timeout_at:
        return WaitOutcome(happened=False)
    return None


def event_matches(
    name: str,
    data: Mapping[str, Any],
    match: Mapping[str, Any],
    *,
    run_id: str,
    contact: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> bool:
    """Does the event `name` with `data`, happening to the run's contact, satisfy a wait's `match`?

    `contact` (the contact as it is after the event) is needed only for `contact.updated` with a `value`
    and for custom events' conditions on the contact; the caller reads it only then (`needs_contact`).
    Engagement events count only for this run's own emails (their data names the run).
    """
    if name in TAG_EVENTS:
        return not match.get("tag") or data.get("tag") == match["tag"]
    if name in ENGAGEMENT:
        if data.get("run") != run_id:
            return False
        if match.get("step") and data.get("step") != match["step"]:
            return False
        return not match.get("link") or data.get("link") == match["link"]
    if name == "contact.updated":
        field = str(match.get("field") or "")
        if field and not field_changed(field, data):
            return False
        if "value" in match:
            condition = Condition(field, ConditionOp.EQUALS, match["value"])
            return condition.matches(Facts(contact=contact or {}))
        return True
    if name == "sms.replied":
        wanted = str(match.get("contains") or "").casefold()
        return not wanted or wanted in str(data.get("body") or "").casefold()
    conditions = _conditions(match)
    facts = Facts(contact=contact or {}, event=data, now=now)
    return all(condition.matches(facts) for condition in conditions)


# The fields whose change `contact.updated` reports (tags and consent have events, or none, of their own).
WATCHABLE_FIELDS = ("email", "phone", "first_name", "last_name")


def watched_field_problem(field: Any) -> str | None:
    """Why a `contact.updated` wait cannot watch `field`, or None: the same fields the admin's builder offers."""
    bare = field.removeprefix("contact.") if isinstance(field, str) else ""
    if bare in WATCHABLE_FIELDS:
        return None
    if bare.startswith("custom_fields.") and len(bare) > len("custom_fields.") and len(bare) <= 200:
        return None  # any custom field's name, as the condition language reads them
    return f"must be one of {', '.join(WATCHABLE_FIELDS)} or custom_fields.<name>"


def field_changed(field: str, data: Mapping[str, Any]) -> bool:
    """Whether `contact.updated`'s data says `field` changed (`first_name`, `contact.email`, `custom_fields.plan`).

    A custom field changed only when its own value did (`changed_custom_fields`, which the contacts service
    fills): another custom field's change leaves a wait for `custom_fields.plan` waiting, whether or not the
    contact has a plan.
    """
    field = field.removeprefix("contact.")
    if field.startswith("custom_fields."):
        name = field.split(".", 1)[1]
        return name in (data.get("changed_custom_fields") or [])
    return field in (data.get("changed") or [])


def needs_contact(name: str, match: Mapping[str, Any]) -> bool:
    """Whether judging this match reads the contact (so the caller reads it once, and only then)."""
    if name == "contact.updated":
        return "value" in match
    if name in TAG_EVENTS or name in ENGAGEMENT or name == "sms.replied":
        return False
    return any(not str(c.field).startswith("event.") for c in _conditions(match))


def _conditions(match: Mapping[str, Any]) -> list[Condition]:
    """A custom event's conditions, as the step's config stored them (checked when the workflow was saved)."""
    raw = match.get("conditions") or []
    errors: list[Any] = []
    return parse_conditions(raw, "match.conditions", errors, roots=EVENT_ROOTS)
