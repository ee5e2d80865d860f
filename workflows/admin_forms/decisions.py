"""The builder's forms for the steps that decide (#11): branch, split, wait for an event, end.

Each produces the CONTRACT's config (`branches` + `default`; `paths`; `event` + `match` + `timeout` +
`on_timeout`; `{}`); where the run goes is chosen from the workflow's steps by key. The rules (a `next`
names a step, weights sum to 100, every path ends) are the domain's; the forms check only what they need
to say plainly before the domain sees the whole graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms

from workflows.admin_forms.conditions import (
    OPERATORS,
    condition_fields,
    is_boolean_field,
    operator_choices,
)
from workflows.admin_forms.context import CONTACT_FIELD_LABELS
from workflows.admin_forms.paths import (
    ConditionBlocksField,
    ConditionBlocksWidget,
    SplitPathsField,
    SplitPathsWidget,
    StepChoiceField,
    StepChoiceWidget,
)
from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, StepConfigForm, register_step_form
from workflows.admin_forms.widgets import ConditionRowsField, ConditionRowsWidget, TagInput
from workflows.domain.actions import parse_duration

VALUE_KINDS = {op: kind for op, (_label, kind) in OPERATORS.items()}


def condition_rows_field(**kwargs: Any) -> ConditionRowsField:
    """A condition rows field reading values as the CONTRACT's operators take them."""
    return ConditionRowsField(value_kinds=VALUE_KINDS, is_boolean=is_boolean_field, **kwargs)


def _conditions_ok(conditions: Any) -> bool:
    return isinstance(conditions, list) and all(
        isinstance(c, Mapping) and set(c) <= {"field", "op", "value"} and isinstance(c.get("field"), str)
        for c in conditions
    )


@register_step_form
class BranchForm(StepConfigForm):
    action_type = "branch"
    label = "Branch (if / else)"
    group = "Decide"
    description = "Send the contact one way or another: the first branch whose conditions all hold is taken."
    keys = {"branches": "branches", "default": "default"}
    decides = True

    branches = ConditionBlocksField(label="Branches", conditions=condition_rows_field())
    default = StepChoiceField(label="Otherwise, go to")
    field_order = ["branches", "default"]

    def setup(self) -> None:
        steps = self.builder.steps
        self.fields["branches"].widget = ConditionBlocksWidget(
            conditions=ConditionRowsWidget(
                field_choices=condition_fields(self.builder),
                operators=operator_choices(),
                earlier_steps="Steps' results",
            ),
            target=StepChoiceWidget(steps=steps),
        )
        cast(StepChoiceField, self.fields["default"]).set_steps(steps)
        self.fields["default"].help_text = "Where contacts go when no branch's conditions hold."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        if set(config) - {"branches", "default"}:
            return None
        branches = config.get("branches") or []
        if not isinstance(branches, list):
            return None
        for branch in branches:
            if not isinstance(branch, Mapping) or set(branch) - {"name", "conditions", "next"}:
                return None
            if not _conditions_ok(branch.get("conditions") or []):
                return None
        return {"branches": [dict(b) for b in branches], "default": config.get("default") or ""}

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        if "branches" in data and not data["branches"]:
            self.add_error("branches", "Add at least one branch: its conditions, and the step it leads to.")
        if "default" in data and not data["default"]:
            self.add_error("default", "Choose where contacts go when no branch's conditions hold.")
        return data

    def to_config(self) -> dict[str, Any]:
        return {"branches": self.cleaned_data["branches"], "default": self.cleaned_data["default"]}


@register_step_form
class SplitForm(StepConfigForm):
    action_type = "split"
    label = "Split (A/B test)"
    group = "Decide"
    description = "Send each contact down one path at random, by the shares you set (the same contact, the same path)."
    keys = {"paths": "paths"}
    decides = True

    paths = SplitPathsField(label="Paths", required=False)

    def setup(self) -> None:
        self.fields["paths"].widget = SplitPathsWidget(target=StepChoiceWidget(steps=self.builder.steps))
        self.fields["paths"].help_text = "The shares must add up to 100%."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        if set(config) - {"paths"}:
            return None
        paths = config.get("paths") or []
        if not isinstance(paths, list) or not all(
            isinstance(p, Mapping) and not set(p) - {"name", "weight", "next"} for p in paths
        ):
            return None
        return {"paths": [dict(p) for p in paths]}

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        paths = data.get("paths")
        if paths is None:
            return data
        if len(paths) < 2:
            self.add_error("paths", "A split needs at least two paths.")
        weights = [p["weight"] for p in paths if isinstance(p["weight"], int)]
        if len(weights) == len(paths) and paths:
            if any(w < 1 or w > 100 for w in weights):
                self.add_error("paths", "Each share is a whole number from 1 to 100.")
            elif sum(weights) != 100:
                self.add_error("paths", f"The shares add up to {sum(weights)}%: they must add up to 100%.")
        return data

    def to_config(self) -> dict[str, Any]:
        return {"paths": self.cleaned_data["paths"]}


ENGAGEMENT_EVENTS = [
    (
        "Email",
        [("email.opened", "The contact opens an email"), ("email.clicked", "The contact clicks a link in an email")],
    ),
    (
        "Contact",
        [
            ("tag.added", "A tag is added to the contact"),
            ("tag.removed", "A tag is removed from the contact"),
            ("contact.updated", "A field of the contact changes"),
        ],
    ),
    ("SMS", [("sms.replied", "The contact replies to a text message")]),
]
EVENT_WORDS = {name: label[:1].lower() + label[1:] for _group, events in ENGAGEMENT_EVENTS for name, label in events}
BUILTIN_WAIT_EVENTS = frozenset(name for _group, events in ENGAGEMENT_EVENTS for name, _label in events)
OTHER_EVENT = "__other__"
TIMEOUT_UNITS = [
    ("minutes", "minutes"),
    ("hours", "hours"),
    ("days", "days"),
    ("weeks", "weeks"),
    ("seconds", "seconds"),
]
_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400}
_UNIT_SUFFIX = {"seconds": "s", "minutes": "m", "hours": "h", "days": "d", "weeks": "w"}
# the match keys each event takes (CONTRACT), and the field each key's errors go to
_MATCH_FIELDS = {
    "tag.added": {"tag": "tag"},
    "tag.removed": {"tag": "tag"},
    "contact.updated": {"field": "contact_field", "value": "contact_value"},
    "email.opened": {"step": "email_step"},
    "email.clicked": {"step": "email_step", "link": "link"},
    "sms.replied": {"contains": "contains"},
}


@register_step_form
class WaitForEventForm(StepConfigForm):
    action_type = "wait_for_event"
    label = "Wait for something to happen"
    group = "Timing"
    description = "Wait until the contact does something (opens, clicks, replies, is tagged…), at most for a while."
    keys = {"event": "event", "timeout": "timeout_amount", "on_timeout": "on_timeout", "match": "event"}
    next_label = "When it happens, go to"

    event = forms.ChoiceField(label="Wait until", required=False, widget=forms.Select(attrs={"data-switch": "1"}))
    custom_event = forms.CharField(
        label="Event name",
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "e.g. order.placed"}),
        help_text="The name your app posts to /api/v1/events.",
    )
    tag = forms.CharField(label="Tag", required=False, max_length=64)
    contact_field = forms.ChoiceField(label="Field", required=False)
    contact_value = forms.CharField(
        label="Changes to",
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "any value"}),
        help_text="Leave empty to wait for any change of this field.",
    )
    email_step = StepChoiceField(label="Which email", blank_label="Any email of this run")
    link = forms.CharField(
        label="Which link",
        required=False,
        widget=forms.URLInput(attrs={"class": "vURLField", "placeholder": "any link (or https://…)"}),
    )
    contains = forms.CharField(
        label="The reply contains",
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "any reply (or e.g. yes)"}),
    )
    event_conditions = condition_rows_field(label="Only if", required=False)
    timeout_amount = forms.IntegerField(
        label="Wait at most",
        required=False,
        min_value=1,
        widget=forms.NumberInput(attrs={"class": "vIntegerField", "min": 1}),
    )
    timeout_unit = forms.ChoiceField(label="Unit", choices=TIMEOUT_UNITS, initial="days", required=False)
    on_timeout = StepChoiceField(label="If it has not happened by then, go to")
    field_order = [
        "event",
        "custom_event",
        "tag",
        "contact_field",
        "contact_value",
        "email_step",
        "link",
        "contains",
        "event_conditions",
        "timeout_amount",
        "timeout_unit",
        "on_timeout",
    ]

    def setup(self) -> None:
        builder = self.builder
        custom = [
            (name, f"{name} (your app's event)") for name in builder.known_events if name not in BUILTIN_WAIT_EVENTS
        ]
        cast(forms.ChoiceField, self.fields["event"]).choices = [
            ("", "— choose what to wait for —"),
            *ENGAGEMENT_EVENTS,
            *([("Your app's events", custom)] if custom else []),
            (OTHER_EVENT, "Another event your app sends…"),
        ]
        self.fields["tag"].widget = TagInput(attrs={"placeholder": "e.g. customer"}, list_id=ACCOUNT_TAGS_LIST)
        cast(forms.ChoiceField, self.fields["contact_field"]).choices = [
            ("", "— choose a field —"),
            ("Contact", [(n, CONTACT_FIELD_LABELS.get(n, n)) for n in ("email", "phone", "first_name", "last_name")]),
            *(
                [("Custom fields", [(f"custom_fields.{n}", n) for n in builder.custom_fields])]
                if builder.custom_fields
                else []
            ),
        ]
        email_steps = [step for step in builder.steps if step.action_type == "send_email"]
        email_field = cast(StepChoiceField, self.fields["email_step"])
        email_field.set_steps(email_steps)
        email_field.widget.attrs["data-only"] = "send_email"
        cast(StepChoiceField, self.fields["on_timeout"]).set_steps(builder.steps)
        self.fields["event_conditions"].widget = ConditionRowsWidget(
            field_choices=[("The event", [("event.", "Event data…")])],
            operators=operator_choices(),
        )
        self.fields["event_conditions"].help_text = "Conditions on the event's data; none: any such event."
        custom_names = "|".join([OTHER_EVENT, *(name for name, _label in custom)])
        self.show_if = {
            "custom_event": ("event", OTHER_EVENT),
            "tag": ("event", "tag.added|tag.removed"),
            "contact_field": ("event", "contact.updated"),
            "contact_value": ("event", "contact.updated"),
            "email_step": ("event", "email.opened|email.clicked"),
            "link": ("event", "email.clicked"),
            "contains": ("event", "sms.replied"),
            "event_conditions": ("event", custom_names),
        }

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        if set(config) - {"event", "match", "timeout", "on_timeout"}:
            return None
        event = config.get("event") or ""
        match = config.get("match") or {}
        if not isinstance(event, str) or not isinstance(match, Mapping):
            return None
        initial: dict[str, Any] = {"on_timeout": config.get("on_timeout") or ""}
        if event in _MATCH_FIELDS:
            fields = _MATCH_FIELDS[event]
            if set(match) - set(fields) or not all(isinstance(v, str) for v in match.values()):
                return None
            initial["event"] = event
            initial.update({fields[key]: value for key, value in match.items()})
        elif event:
            if set(match) - {"conditions"} or not _conditions_ok(match.get("conditions") or []):
                return None
            initial["event"] = OTHER_EVENT
            initial["custom_event"] = event
            initial["event_conditions"] = list(match.get("conditions") or [])
        timeout = config.get("timeout")
        if timeout is not None:
            seconds = parse_duration(timeout) if isinstance(timeout, str) else timeout
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                return None
            unit = next(
                (u for u in ("weeks", "days", "hours", "minutes") if seconds % _UNIT_SECONDS[u] == 0), "seconds"
            )
            initial["timeout_amount"], initial["timeout_unit"] = int(seconds // _UNIT_SECONDS[unit]), unit
        return initial

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.initial.get("event") == OTHER_EVENT and self.initial.get("custom_event") in self.builder.known_events:
            self.initial["event"] = self.initial.pop("custom_event")  # listed among the account's events

    def event_name(self) -> str:
        event = self.cleaned_data.get("event") or ""
        return (self.cleaned_data.get("custom_event") or "").strip() if event == OTHER_EVENT else event

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        if not data.get("event"):
            self.add_error("event", "Choose what to wait for.")
        elif data["event"] == OTHER_EVENT and not (data.get("custom_event") or "").strip():
            self.add_error("custom_event", "Type the name of the event your app sends.")
        if data.get("event") == "contact.updated" and not data.get("contact_field"):
            self.add_error("contact_field", "Choose the field to watch.")
        if data.get("timeout_amount") is None and "timeout_amount" not in self.errors:
            self.add_error("timeout_amount", "Say how long to wait at most, e.g. 3 days.")
        if "on_timeout" in data and not data["on_timeout"]:
            self.add_error("on_timeout", "Choose where contacts go when it has not happened in time.")
        return data

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        event = self.event_name()
        match: dict[str, Any] = {}
        if event in _MATCH_FIELDS:
            for key, field in _MATCH_FIELDS[event].items():
                value = (data.get(field) or "").strip()
                if value:
                    match[key] = value
        elif data.get("event_conditions"):
            match["conditions"] = data["event_conditions"]
        unit = data.get("timeout_unit") or "days"
        timeout = f"{data['timeout_amount']}{_UNIT_SUFFIX[unit]}"  # the wait step's own form, e.g. 3d
        return {"event": event, "match": match, "timeout": timeout, "on_timeout": data["on_timeout"]}

    def field_for(self, rest: str) -> str | None:
        """`match.tag` goes to the tag field, `match.conditions[0]` to the event's conditions."""
        if rest.startswith("match."):
            key = rest[len("match.") :].split(".", 1)[0].split("[", 1)[0]
            event = self.event_name() if hasattr(self, "cleaned_data") else ""
            field = _MATCH_FIELDS.get(event, {}).get(key) or ("event_conditions" if key == "conditions" else None)
            if field in self.fields:
                return field
        return super().field_for(rest)


@register_step_form
class EndForm(StepConfigForm):
    action_type = "end"
    label = "End the run"
    group = "Decide"
    description = "Stop here: the contact's run completes (“ended by step”)."
    keys = {}
    decides = True

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {} if not config else None

    def to_config(self) -> dict[str, Any]:
        return {}
