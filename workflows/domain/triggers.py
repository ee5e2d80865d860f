"""What starts a workflow: triggers, the contact filter, and the re-enrollment rule a workflow sets.

A workflow is started by a person (manual), by an API client (api), or by an
event (`contact.created`, `contact.updated`, `tag.added` / `tag.removed`
optionally for one tag, or any custom name an API client sends). Its
optional filter must match the contact at the moment of the event. Its
re-enrollment rule says whether a contact already enrolled may enter again;
that rule, the chain guard and the limit are judged by the one enrollment
gate (`enrollment.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

from contacts.domain.model import ContactError, normalize_tag
from workflows.domain.validation import Reader

TAG_EVENTS = frozenset({"tag.added", "tag.removed"})
# A deleted contact's runs are deleted with it: nothing can run for it.
UNTRIGGERABLE_EVENTS = frozenset({"contact.deleted"})
BUILTIN_EVENTS = (
    "contact.created",
    "contact.updated",
    "tag.added",
    "tag.removed",
    # Engagement, recorded by Relay itself: email tracking (/t/...) and inbound SMS replies.
    "email.opened",
    "email.clicked",
    "sms.replied",
)
EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,99}")
MAX_CONDITIONS = 20
CONTACT_FILTER_FIELDS = ("email", "phone", "first_name", "last_name", "tags", "unsubscribed", "sms_opted_out")


class TriggerType(StrEnum):
    MANUAL = "manual"  # started by a person in the admin
    API = "api"  # started by an API client
    EVENT = "event"  # started by a matching event


class Reenrollment(StrEnum):
    NEVER = "never"  # a contact enters once, ever
    AFTER_FINISH = "after_finish"  # again, but only once its earlier run has ended
    ALWAYS = "always"  # again, even while an earlier run is in progress


class ConditionOp(StrEnum):
    EQUALS = "equals"
    NOT_EQUALS = "not_equals"
    CONTAINS = "contains"
    NOT_CONTAINS = "not_contains"
    IS_SET = "is_set"
    IS_NOT_SET = "is_not_set"
    GREATER_THAN = "greater_than"
    LESS_THAN = "less_than"


_NO_VALUE_OPS = frozenset({ConditionOp.IS_SET, ConditionOp.IS_NOT_SET})
_NUMERIC_OPS = frozenset({ConditionOp.GREATER_THAN, ConditionOp.LESS_THAN})


@dataclass(frozen=True)
class ContactCondition:
    """One test on the contact; a trigger's filter matches when all of its conditions do."""

    field: str  # a contact field, or `custom_fields.<key>`
    op: ConditionOp
    value: Any = None

    def matches(self, contact: Mapping[str, Any]) -> bool:
        actual = _lookup(contact, self.field)
        op = self.op
        if op is ConditionOp.IS_SET:
            return _is_set(actual)
        if op is ConditionOp.IS_NOT_SET:
            return not _is_set(actual)
        if op in _NUMERIC_OPS:
            if isinstance(actual, bool) or not isinstance(actual, int | float):
                return False
            return actual > self.value if op is ConditionOp.GREATER_THAN else actual < self.value
        if op in (ConditionOp.CONTAINS, ConditionOp.NOT_CONTAINS):
            found = _contains(actual, self.value, tags=self.field == "tags")
            return found if op is ConditionOp.CONTAINS else not found
        equal = _fold(actual) == _fold(self.value)
        return equal if op is ConditionOp.EQUALS else not equal


def _lookup(contact: Mapping[str, Any], path: str) -> Any:
    if path.startswith("custom_fields."):
        return (contact.get("custom_fields") or {}).get(path.split(".", 1)[1])
    return contact.get(path)


def _is_set(value: Any) -> bool:
    return value not in (None, "", [], {})


def _fold(value: Any) -> Any:
    """Text compares case-insensitively and without surrounding spaces: `Pro` equals `pro `."""
    return value.strip().casefold() if isinstance(value, str) else value


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


@dataclass(frozen=True)
class Trigger:
    type: TriggerType = TriggerType.MANUAL
    event: str = ""  # for EVENT: the event's name
    tag: str = ""  # for tag.added / tag.removed: only this tag ("" = any tag)
    conditions: tuple[ContactCondition, ...] = ()

    def matches_event(self, name: str, data: Mapping[str, Any]) -> bool:
        if self.type is not TriggerType.EVENT or self.event != name:
            return False
        if self.tag and name in TAG_EVENTS:
            return data.get("tag") == self.tag
        return True

    def matches_contact(self, contact: Mapping[str, Any]) -> bool:
        return all(condition.matches(contact) for condition in self.conditions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "event": self.event,
            "tag": self.tag,
            "filter": [{"field": c.field, "op": c.op.value, "value": c.value} for c in self.conditions],
        }


def parse_trigger(reader: Reader) -> Trigger:
    """`{"type": "event", "event": "tag.added", "tag": "vip", "filter": [{"field": ..., "op": ..., "value": ...}]}`"""
    kind = reader.string("type", choices=[t.value for t in TriggerType], default=TriggerType.MANUAL.value)
    trigger_type = TriggerType(kind or TriggerType.MANUAL)
    event = reader.string(
        "event",
        max_length=100,
        pattern=EVENT_NAME,
        pattern_reason="an event name is letters, digits and . _ : - (at most 100), e.g. tag.added",
    )
    tag = reader.string("tag", max_length=200) or ""
    event_refused = any(e.path == reader.at("event") for e in reader.errors)
    if trigger_type is TriggerType.EVENT and not event and not event_refused:
        reader.error(reader.at("event"), f"is required for an event trigger (e.g. {', '.join(BUILTIN_EVENTS)})")
    known = reader.context.known_events
    unknown = known is not None and event not in known and event not in BUILTIN_EVENTS
    if trigger_type is TriggerType.EVENT and event and not event_refused and unknown:
        listed = ", ".join([*BUILTIN_EVENTS, *sorted((known or frozenset()) - set(BUILTIN_EVENTS))])
        reader.error(
            reader.at("event"),
            f"{event!r} is not an event Relay knows; known events: {listed}. "
            "A custom event your app sends must be declared first",
        )
    if event in UNTRIGGERABLE_EVENTS:
        reader.error(reader.at("event"), f"{event} cannot start a workflow: the contact and its runs are deleted")
    if trigger_type is not TriggerType.EVENT and (event or tag):
        reader.error(reader.at("event"), "is only used by event triggers")
    if tag:
        if event not in TAG_EVENTS:
            reader.error(reader.at("tag"), "is only used with the tag.added and tag.removed events")
        else:
            try:
                tag = normalize_tag(tag)
            except ContactError as exc:
                reader.error(reader.at("tag"), exc.reason)
    conditions = _parse_conditions(reader)
    reader.refuse_unknown(["type", "event", "tag", "filter"])
    return Trigger(type=trigger_type, event=event or "", tag=tag, conditions=tuple(conditions))


def parse_contact_filter(reader: Reader) -> list[ContactCondition]:
    """The `filter` key of `reader`'s object: conditions on a contact that must all hold (one language for
    trigger filters and scheduled hooks' audiences)."""
    return _parse_conditions(reader)


def contact_matches(conditions: tuple[ContactCondition, ...] | list[ContactCondition], contact: Mapping) -> bool:
    return all(condition.matches(contact) for condition in conditions)


def _parse_conditions(reader: Reader) -> list[ContactCondition]:
    raw = reader.get("filter")
    path = reader.at("filter")
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        reader.error(path, "must be a list of conditions")
        return []
    if len(raw) > MAX_CONDITIONS:
        reader.error(path, f"must have at most {MAX_CONDITIONS} conditions")
        return []
    conditions = []
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            reader.error(item_path, "must be an object with field, op and value")
            continue
        before = len(reader.errors)
        field = item.get("field")
        if not isinstance(field, str) or not (
            field in CONTACT_FILTER_FIELDS or (field.startswith("custom_fields.") and len(field) > 14)
        ):
            reader.error(
                f"{item_path}.field",
                f"must be one of: {', '.join(CONTACT_FILTER_FIELDS)}, or custom_fields.<name>",
            )
        op_raw = item.get("op")
        op = ConditionOp(op_raw) if isinstance(op_raw, str) and op_raw in {o.value for o in ConditionOp} else None
        if op is None:
            reader.error(f"{item_path}.op", f"must be one of: {', '.join(o.value for o in ConditionOp)}")
        value = item.get("value")
        if op is not None and op not in _NO_VALUE_OPS:
            if value is None:
                reader.error(f"{item_path}.value", f"is required for {op.value}")
            elif op in _NUMERIC_OPS and (isinstance(value, bool) or not isinstance(value, int | float)):
                reader.error(f"{item_path}.value", f"must be a number for {op.value}")
            elif not isinstance(value, str | int | float | bool):
                reader.error(f"{item_path}.value", "must be a string, number or boolean")
        for key in item:
            if key not in ("field", "op", "value"):
                reader.error(f"{item_path}.{key}", "is not a known setting; expected field, op, value")
        if len(reader.errors) == before and op is not None:
            condition = ContactCondition(field=cast(str, field), op=op, value=None if op in _NO_VALUE_OPS else value)
            conditions.append(condition)  # field was checked above: no error, so it is one of the allowed names
    return conditions
