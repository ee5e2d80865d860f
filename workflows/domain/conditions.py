"""The one condition language: trigger filters, branches, goals and event matches all speak it.

A condition is `{"field": "<path>", "op": "<op>", "value": <any>}`. The path
names a fact about the run (the CONTRACT of issue #11):

- a bare contact field (`email`, `tags`, `custom_fields.plan`, `consent.email`), or `contact.<field>`;
- `trigger.<path>`: the run's trigger data;
- `steps.<key>.<path>`: what an earlier step of this run produced (`steps.call_api.status_code`,
  `steps.call_api.body.plan`, `steps.welcome.opened`);
- `event.<path>`: the event being tested (goals, a wait's match).

Each use allows only the roots that make sense there (a trigger filter reads
the contact only). Checked when saved, with the path of each problem; an
evaluation never raises: a value of the wrong kind simply does not match.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any

from contacts.domain.model import ContactError, normalize_tag
from kernel.local_time import local_instant
from workflows.domain.errors import FieldError

MAX_CONDITIONS = 20
MAX_LIST_VALUES = 100
MAX_PATH_LENGTH = 200
CONTACT_FIELDS = ("email", "phone", "first_name", "last_name", "tags", "unsubscribed", "sms_opted_out")
CONSENT_FIELDS = ("email", "sms", "voice")
CONTACT_ROOTS = frozenset({"contact"})  # what a trigger filter may read
RUN_ROOTS = frozenset({"contact", "trigger", "steps"})  # what a branch may read
EVENT_ROOTS = frozenset({"contact", "trigger", "steps", "event"})  # goals and waits' matches
_KEY = re.compile(r"[a-z0-9_]{1,64}")
_SEGMENT = re.compile(r"[^.\s]{1,100}")
_RELATIVE = re.compile(
    r"\s*(?P<sign>[+-])?\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>seconds?|secs?|s|minutes?|mins?|m|hours?|h|days?|d|weeks?|w)\s*",
    re.IGNORECASE,
)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class ConditionOp(StrEnum):
    EQUALS = "equals"
    NOT_EQUALS = "not_equals"
    CONTAINS = "contains"
    NOT_CONTAINS = "not_contains"
    IS_SET = "is_set"  # present and not empty
    IS_NOT_SET = "is_not_set"
    EXISTS = "exists"  # present at all (even empty or null-valued)
    NOT_EXISTS = "not_exists"
    IN = "in"  # value is a list
    NOT_IN = "not_in"
    GREATER_THAN = "greater_than"
    LESS_THAN = "less_than"
    GREATER_OR_EQUAL = "greater_or_equal"
    LESS_OR_EQUAL = "less_or_equal"
    BEFORE = "before"  # ISO 8601 date/time, or relative to now: "-3 days"
    AFTER = "after"


NO_VALUE_OPS = frozenset({ConditionOp.IS_SET, ConditionOp.IS_NOT_SET, ConditionOp.EXISTS, ConditionOp.NOT_EXISTS})
NUMERIC_OPS = frozenset(
    {ConditionOp.GREATER_THAN, ConditionOp.LESS_THAN, ConditionOp.GREATER_OR_EQUAL, ConditionOp.LESS_OR_EQUAL}
)
LIST_OPS = frozenset({ConditionOp.IN, ConditionOp.NOT_IN})
TIME_OPS = frozenset({ConditionOp.BEFORE, ConditionOp.AFTER})
_MISSING = object()


@dataclass(frozen=True)
class Facts:
    """What a condition may read. `steps` maps a step key to what its latest visit produced."""

    contact: Mapping[str, Any]
    trigger: Mapping[str, Any] | None = None
    steps: Mapping[str, Any] | None = None
    event: Mapping[str, Any] | None = None
    now: datetime | None = None
    # The contact's clock, asked only when a date or time without an offset is compared (a bare `2026-12-01`
    # is that day on the contact's calendar); None: UTC.
    clock: Callable[[], tzinfo] | None = None


@dataclass(frozen=True)
class Condition:
    """One test; a list of them holds when all of them do."""

    field: str
    op: ConditionOp
    value: Any = None

    def lookup(self, facts: Facts | Mapping[str, Any]) -> Any:
        """The value the field names, or None when there is none (what a decision logs)."""
        found = resolve(self.field, facts)
        return None if found is _MISSING else found

    def matches(self, facts: Facts | Mapping[str, Any]) -> bool:
        """`facts` may be a bare contact mapping (trigger filters)."""
        actual = resolve(self.field, facts)
        now = facts.now if isinstance(facts, Facts) else None
        clock = facts.clock if isinstance(facts, Facts) else None
        return _test(self.op, actual, self.value, tags=self.field in ("tags", "contact.tags"), now=now, clock=clock)

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "op": self.op.value, "value": self.value}


def all_hold(conditions: Sequence[Condition], facts: Facts | Mapping[str, Any]) -> bool:
    return all(condition.matches(facts) for condition in conditions)


# --- reading a path ------------------------------------------------------------------------
def resolve(path: str, facts: Facts | Mapping[str, Any]) -> Any:
    if not isinstance(facts, Facts):
        facts = Facts(contact=facts)
    root, _, rest = path.partition(".")
    if root == "trigger":
        return _dig(facts.trigger or {}, rest)
    if root == "event":
        return _dig(facts.event or {}, rest)
    if root == "steps":
        key, _, inner = rest.partition(".")
        result = (facts.steps or {}).get(key, _MISSING)
        if result is _MISSING or not inner:
            return result
        if inner.startswith("body.") and isinstance(result, Mapping) and "json" in result:
            return _dig(result["json"], inner[len("body.") :])  # a webhook's JSON answer, parsed
        return _dig(result, inner)
    if root == "contact":
        path = rest
    return _contact_value(facts.contact, path)


def _contact_value(contact: Mapping[str, Any], path: str) -> Any:
    if path.startswith("custom_fields."):
        return (contact.get("custom_fields") or {}).get(path.split(".", 1)[1], _MISSING)
    if path.startswith("consent."):
        channel = path.split(".", 1)[1]
        if channel == "email":
            return not contact.get("unsubscribed")
        if channel in ("sms", "voice"):
            return not contact.get("sms_opted_out")
        return _MISSING
    return contact.get(path, _MISSING)


def _dig(value: Any, path: str) -> Any:
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


# --- testing a value --------------------------------------------------------------------------
def _test(
    op: ConditionOp, actual: Any, wanted: Any, *, tags: bool, now: datetime | None, clock: Callable[[], tzinfo] | None
) -> bool:
    if op is ConditionOp.EXISTS:
        return actual is not _MISSING and actual is not None
    if op is ConditionOp.NOT_EXISTS:
        return actual is _MISSING or actual is None
    if actual is _MISSING:
        actual = None
    if op is ConditionOp.IS_SET:
        return _is_set(actual)
    if op is ConditionOp.IS_NOT_SET:
        return not _is_set(actual)
    if op in NUMERIC_OPS:
        left, right = _number(actual), _number(wanted)
        if left is None or right is None:
            return False
        return {
            ConditionOp.GREATER_THAN: left > right,
            ConditionOp.LESS_THAN: left < right,
            ConditionOp.GREATER_OR_EQUAL: left >= right,
            ConditionOp.LESS_OR_EQUAL: left <= right,
        }[op]
    if op in TIME_OPS:
        moment, bound = _moment(actual, now, clock), _moment(wanted, now, clock)
        if moment is None or bound is None:
            return False
        return moment < bound if op is ConditionOp.BEFORE else moment > bound
    if op in (ConditionOp.CONTAINS, ConditionOp.NOT_CONTAINS):
        found = _contains(actual, wanted, tags=tags)
        return found if op is ConditionOp.CONTAINS else not found
    if op in LIST_OPS:
        options = [_fold(v) for v in wanted] if isinstance(wanted, list) else []
        items = actual if isinstance(actual, list) else [actual]
        found = any(_fold(item) in options for item in items)
        return found if op is ConditionOp.IN else not found
    equal = _equal(actual, wanted)
    return equal if op is ConditionOp.EQUALS else not equal


def _is_set(value: Any) -> bool:
    return value not in (None, "", [], {})


def _fold(value: Any) -> Any:
    """Text compares case-insensitively and without surrounding spaces: `Pro` equals `pro `."""
    return value.strip().casefold() if isinstance(value, str) else value


def _equal(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return actual is wanted or (isinstance(actual, bool) and isinstance(wanted, bool) and actual == wanted)
    return _fold(actual) == _fold(wanted)


def _number(value: Any) -> float | None:
    """A number, or a text that is one (a webhook answered `"42"`); anything else compares as no number."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            number = float(value.strip())
        else:
            return None
    except (ValueError, OverflowError):  # not a number, or one too large for a float
        return None
    return number if math.isfinite(number) else None


def _contains(actual: Any, wanted: Any, *, tags: bool) -> bool:
    if isinstance(actual, list):
        if tags and isinstance(wanted, str):
            try:
                return normalize_tag(wanted) in actual
            except ContactError:
                return False
        return any(_fold(item) == _fold(wanted) for item in actual)
    if isinstance(actual, str) and isinstance(wanted, str):
        return _fold(wanted) in _fold(actual)
    return False


def relative_seconds(text: str) -> float | None:
    """`"-3 days"` -> -259200.0; None when the text is no relative time."""
    match = _RELATIVE.fullmatch(text)
    if not match:
        return None
    seconds = float(match["n"]) * _UNIT[match["unit"][0].lower()]
    return -seconds if match["sign"] == "-" else seconds


def _moment(value: Any, now: datetime | None, clock: Callable[[], tzinfo] | None = None) -> datetime | None:
    """An instant from a value: aware as it is; a date, or a date-time without an offset, read on the contact's
    clock (its midnight for a date; kernel.local_time for DST), UTC when there is none; relative to now."""
    if isinstance(value, datetime):
        return value if value.tzinfo else _on_clock(value, clock)
    if isinstance(value, date):
        return _on_clock(datetime(value.year, value.month, value.day), clock)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        offset = relative_seconds(text)
        if offset is not None:
            return (now or datetime.now(UTC)) + timedelta(seconds=offset)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except (ValueError, OverflowError):  # no date, or one beyond the calendar
        return None
    return parsed if parsed.tzinfo else _on_clock(parsed, clock)


def _on_clock(wall: datetime, clock: Callable[[], tzinfo] | None) -> datetime | None:
    if clock is None:
        return wall.replace(tzinfo=UTC)
    try:
        return local_instant(wall, clock())
    except OverflowError:  # the first or last day of the calendar, moved past its edge by an offset
        return None


def time_value_problem(value: Any) -> str | None:
    if isinstance(value, str) and _moment(value, None) is not None:
        return None
    return 'must be an ISO 8601 date or date-time (2026-12-01, 2026-12-01T09:00:00Z) or relative, like "-3 days"'


# --- reading conditions from input --------------------------------------------------------------
def field_problem(field: Any, roots: Collection[str]) -> str | None:
    """Why `field` is no path this use may read, or None."""
    allowed = _describe(roots)
    if not isinstance(field, str) or not field or len(field) > MAX_PATH_LENGTH:
        return f"must be one of: {allowed}"
    root, _, rest = field.partition(".")
    if root in ("trigger", "event", "steps") and root not in roots:
        return f"cannot be read here; expected one of: {allowed}"
    if root == "trigger" or root == "event":
        return None if rest and all(_SEGMENT.fullmatch(p) for p in rest.split(".")) else f"must be {root}.<path>"
    if root == "steps":
        key, _, inner = rest.partition(".")
        if not _KEY.fullmatch(key) or (inner and not all(_SEGMENT.fullmatch(p) for p in inner.split("."))):
            return "must be steps.<step key>.<path>, e.g. steps.call_api.status_code"
        return None
    bare = rest if root == "contact" else field
    if bare in CONTACT_FIELDS:
        return None
    if bare.startswith("custom_fields.") and len(bare) > len("custom_fields."):
        return None
    if bare.startswith("consent.") and bare.split(".", 1)[1] in CONSENT_FIELDS:
        return None
    return f"must be one of: {allowed}"


def _describe(roots: Collection[str]) -> str:
    parts = [*CONTACT_FIELDS, "custom_fields.<name>", "consent.email|sms|voice"]
    for root, example in (("trigger", "trigger.<path>"), ("steps", "steps.<key>.<path>"), ("event", "event.<path>")):
        if root in roots:
            parts.append(example)
    return ", ".join(parts)


def parse_conditions(
    raw: Any, path: str, errors: list[FieldError], *, roots: Collection[str] = CONTACT_ROOTS, allow_empty: bool = True
) -> list[Condition]:
    """A list of conditions at `path`; every problem goes to `errors` with its path (then do not use the result)."""
    if raw is None or raw == []:
        if not allow_empty:
            errors.append(FieldError(path, "needs at least one condition"))
        return []
    if not isinstance(raw, list):
        errors.append(FieldError(path, "must be a list of conditions"))
        return []
    if len(raw) > MAX_CONDITIONS:
        errors.append(FieldError(path, f"must have at most {MAX_CONDITIONS} conditions"))
        return []
    conditions = []
    for index, item in enumerate(raw):
        condition = parse_condition(item, f"{path}[{index}]", errors, roots=roots)
        if condition is not None:
            conditions.append(condition)
    return conditions


def parse_condition(item: Any, path: str, errors: list[FieldError], *, roots: Collection[str]) -> Condition | None:
    if not isinstance(item, Mapping):
        errors.append(FieldError(path, "must be an object with field, op and value"))
        return None
    before = len(errors)
    field = item.get("field")
    problem = field_problem(field, roots)
    if problem:
        errors.append(FieldError(f"{path}.field", problem))
    op_raw = item.get("op")
    op = ConditionOp(op_raw) if isinstance(op_raw, str) and op_raw in {o.value for o in ConditionOp} else None
    if op is None:
        errors.append(FieldError(f"{path}.op", f"must be one of: {', '.join(o.value for o in ConditionOp)}"))
    value = item.get("value")
    if op is not None and op not in NO_VALUE_OPS:
        reason = _value_problem(op, value)
        if reason:
            errors.append(FieldError(f"{path}.value", reason))
    for key in item:
        if key not in ("field", "op", "value"):
            errors.append(FieldError(f"{path}.{key}", "is not a known setting; expected field, op, value"))
    if len(errors) != before or op is None or not isinstance(field, str):
        return None
    return Condition(field=field, op=op, value=None if op in NO_VALUE_OPS else value)


def _value_problem(op: ConditionOp, value: Any) -> str | None:
    if value is None:
        return f"is required for {op.value}"
    if op in NUMERIC_OPS:
        if isinstance(value, bool) or not isinstance(value, int | float) or _number(value) is None:
            return f"must be a number for {op.value}"
        return None
    if op in LIST_OPS:
        if not isinstance(value, list) or not value:
            return f"must be a non-empty list for {op.value}"
        if len(value) > MAX_LIST_VALUES:
            return f"must have at most {MAX_LIST_VALUES} values"
        if not all(isinstance(v, str | int | float | bool) for v in value):
            return "every value must be a string, number or boolean"
        return None
    if op in TIME_OPS:
        return time_value_problem(value)
    if not isinstance(value, str | int | float | bool):
        return "must be a string, number or boolean"
    return None
