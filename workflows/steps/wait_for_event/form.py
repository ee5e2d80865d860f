"""The builder's form of a wait for an event: what to wait for (the engagement events, the account's own, or
another by name), what it must match, how long at most, and where the run goes if it does not happen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms

from workflows.admin_forms.condition_rows import condition_rows_field, conditions_ok
from workflows.admin_forms.conditions import operator_choices
from workflows.admin_forms.context import CONTACT_FIELD_LABELS
from workflows.admin_forms.paths import StepChoiceField
from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, StepConfigForm, step_forms
from workflows.admin_forms.widgets import ConditionRowsWidget, TagInput
from workflows.domain.actions import parse_duration

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
        tracked = [name for name, form in step_forms().items() if form.tracks_engagement]  # email steps
        email_field = cast(StepChoiceField, self.fields["email_step"])
        email_field.set_steps([step for step in builder.steps if step.action_type in tracked])
        email_field.widget.attrs["data-only"] = "|".join(tracked)
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
            if set(match) - {"conditions"} or not conditions_ok(match.get("conditions") or []):
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


FORM = WaitForEventForm
