"""Wait until an event happens to the contact (the step's `next`), or the timeout passes (`on_timeout`); what
`match` may say depends on the event (below), any other (custom) event takes conditions over its data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contacts.domain.model import ContactError, normalize_tag
from workflows.domain.actions import STEP_KEY, duration_seconds, http_url_problem, target
from workflows.domain.conditions import EVENT_ROOTS, parse_conditions
from workflows.domain.step_types import StepConfigType
from workflows.domain.triggers import EVENT_NAME
from workflows.domain.validation import Reader
from workflows.domain.waits import EventWait, watched_field_problem


@dataclass(frozen=True)
class WaitForEventConfig(EventWait):
    pass


def parse(r: Reader) -> WaitForEventConfig:
    event = r.string(
        "event",
        required=True,
        max_length=100,
        pattern=EVENT_NAME,
        pattern_reason="an event name is letters, digits and . _ : - (at most 100), e.g. email.clicked",
    )
    raw_match = r.get("match")
    match = _event_match(r, event or "", raw_match if raw_match is not None else {})
    seconds = None
    timeout = r.get("timeout")
    if timeout is None:
        r.error(r.at("timeout"), 'is required: how long to wait, e.g. "3 days" or a number of seconds')
    else:
        seconds = duration_seconds(r, timeout, key="timeout")
    return WaitForEventConfig(
        event=event or "", match=match, timeout=seconds or 0.0, on_timeout=target(r, "on_timeout")
    )


# What a wait may match, per event (the CONTRACT); any other (custom) event: conditions over its data.
_MATCH_KEYS: dict[str, tuple[str, ...]] = {
    "tag.added": ("tag",),
    "tag.removed": ("tag",),
    "contact.updated": ("field", "value"),
    "email.opened": ("step",),
    "email.clicked": ("step", "link"),
    "sms.replied": ("contains",),
}


def _event_match(r: Reader, event: str, raw: Any) -> dict[str, Any]:
    path = r.at("match")
    if not isinstance(raw, Mapping):
        r.error(path, "must be an object")
        return {}
    allowed = _MATCH_KEYS.get(event, ("conditions",))
    match: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = f"{path}.{key}"
        if key not in allowed:
            expected = ", ".join(allowed)
            r.error(key_path, f"is not a known setting for {event or 'this event'}; expected one of: {expected}")
        elif key == "conditions":
            conditions = parse_conditions(value, key_path, r.errors, roots=EVENT_ROOTS)
            match[key] = [c.as_dict() for c in conditions]
        elif key == "tag":
            if not isinstance(value, str):
                r.error(key_path, "must be a string")
                continue
            try:
                match[key] = normalize_tag(value)
            except ContactError as exc:
                r.error(key_path, exc.reason)
        elif key == "step":
            if not isinstance(value, str) or not STEP_KEY.fullmatch(value):
                r.error(key_path, "must be the key of an email step of this workflow")
            else:
                match[key] = value
        elif key == "link":
            problem = http_url_problem(value) if isinstance(value, str) else "must be a URL"
            if problem:
                r.error(key_path, problem)
            else:
                match[key] = value
        elif key == "field" and event == "contact.updated" and r.context.check_watched_fields:
            problem = watched_field_problem(value)
            if problem:
                r.error(key_path, problem)
            else:
                match[key] = value
        elif key == "value":
            if not isinstance(value, str | int | float | bool):
                r.error(key_path, "must be a string, number or boolean")
            else:
                match[key] = value
        elif not isinstance(value, str) or not value or len(value) > 200:
            r.error(key_path, "must be a text of at most 200 characters")
        else:
            match[key] = value
    clean = not any(e.path.startswith(path) for e in r.errors)
    if event == "contact.updated" and "field" not in raw and clean:
        r.error(f"{path}.field", "is required: which contact field must change")
    if event in ("tag.added", "tag.removed") and "tag" not in raw and clean:
        r.error(f"{path}.tag", "is required: which tag")
    return match


def exits(config: Any, here: str) -> list[tuple[str, str]]:
    assert isinstance(config, WaitForEventConfig)
    return [(f"{here}.config.on_timeout", config.on_timeout)]


CONFIG = StepConfigType(
    name="wait_for_event",
    keys=("event", "match", "timeout", "on_timeout"),
    parse=parse,
    exits=exits,
    waits=True,
)
