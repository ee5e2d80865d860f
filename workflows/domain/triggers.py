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
from typing import Any

from contacts.domain.model import ContactError, normalize_tag
from workflows.domain.conditions import (
    CONTACT_FIELDS,
    CONTACT_ROOTS,
    MAX_CONDITIONS,
    Condition,
    ConditionOp,
    parse_conditions,
)
from workflows.domain.validation import Reader

__all__ = ["CONTACT_FILTER_FIELDS", "MAX_CONDITIONS", "ConditionOp", "ContactCondition"]

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
CONTACT_FILTER_FIELDS = CONTACT_FIELDS


class TriggerType(StrEnum):
    MANUAL = "manual"  # started by a person in the admin
    API = "api"  # started by an API client
    EVENT = "event"  # started by a matching event


class Reenrollment(StrEnum):
    NEVER = "never"  # a contact enters once, ever
    AFTER_FINISH = "after_finish"  # again, but only once its earlier run has ended
    ALWAYS = "always"  # again, even while an earlier run is in progress


# The condition language lives in workflows.domain.conditions; a trigger filter reads the contact only.
ContactCondition = Condition


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
    return parse_conditions(raw, reader.at("filter"), reader.errors, roots=CONTACT_ROOTS)
