"""The workflow's own form: its name, who enters it (the trigger, in plain words) and whether again."""

from __future__ import annotations

import re
from typing import Any, cast

from django import forms

from integrations.admin_forms import (
    SendingMedia,
    declare_fields,
    layer_document,
    layer_fields,
    layer_initial,
    layer_problems,
)
from workflows.admin_forms.condition_rows import condition_rows_field
from workflows.admin_forms.conditions import condition_fields, operator_choices
from workflows.admin_forms.context import BuilderContext
from workflows.admin_forms.paths import END, ConditionBlocksField, ConditionBlocksWidget, StepChoiceWidget
from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, where_in_list
from workflows.admin_forms.widgets import ConditionRowsWidget, TagInput
from workflows.application.workflows import check_workflow
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.triggers import BUILTIN_EVENTS
from workflows.infrastructure.models import Workflow

OTHER_EVENT = "__other__"
EVENT_LABELS = {
    "contact.created": "A contact is created",
    "contact.updated": "A contact is updated",
    "tag.added": "A tag is added to a contact",
    "tag.removed": "A tag is removed from a contact",
}
_CONDITION_PATH = re.compile(r"trigger\.filter\[(\d+)\](?:\.(\w+))?")
_GOAL_PATH = re.compile(r"goals\[(\d+)\](?:\.(.*))?")
_GOAL_THEN = re.compile(r"goals\[(\d+)\]\.then")
_POSTED_KEY = re.compile(r"steps-(\d+)-key")


def goals_supported() -> bool:
    """Whether the workflow model holds goals yet (#11's goals land with the engine that meets them)."""
    return any(f.name == "goals" for f in Workflow._meta.get_fields())


def _shown_then(then: Any) -> str:
    return "" if then in (None, "", END) else str(then)  # blank is "end the run: goal met"


SENDING = "sr_"  # the prefix of the fields of the workflow's sending overrides (integrations.admin_forms)


class WorkflowForm(forms.ModelForm):
    Media = SendingMedia  # the sending overrides' script (integrations.admin_forms)

    trigger_type = forms.ChoiceField(
        label="Start this workflow",
        choices=[
            ("event", "When something happens to a contact"),
            ("manual", "By hand, from this admin"),
            ("api", "From your app, through the API"),
        ],
        widget=forms.RadioSelect(attrs={"data-switch": "1"}),
        initial="event",
    )
    trigger_event = forms.ChoiceField(label="When", required=False, widget=forms.Select(attrs={"data-switch": "1"}))
    trigger_custom_event = forms.CharField(
        label="Event name",
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "e.g. order.placed"}),
        help_text="The name your app posts to /api/v1/events. Choosing it here declares it for this account.",
    )
    trigger_tag = forms.CharField(label="Tag", required=False, max_length=64)
    trigger_filter = condition_rows_field(label="Only for contacts where", required=False)
    goals = ConditionBlocksField(
        label="What counts as a goal",
        conditions=condition_rows_field(),
        block_label="Goal",
        need_target="",
        default_target=END,
        help_text="When a contact in this workflow meets a goal, wherever their run is, it ends (or jumps to "
        "the step you choose) and no later step runs. The first goal met counts.",
    )
    reenrollment = forms.ChoiceField(
        label="Can a contact go through it again?",
        choices=[
            ("never", "No: each contact goes through once"),
            ("after_finish", "Yes, once their previous run has finished"),
            ("always", "Yes, even while a previous run is still going"),
        ],
        widget=forms.RadioSelect,
        initial="never",
    )

    track_email_engagement = forms.TypedChoiceField(
        label="Track opens and clicks of this workflow's emails",
        choices=[
            ("", "As the account is set"),
            ("true", "Yes: add the open pixel and tracked links"),
            ("false", "No: send the links as they are"),
        ],
        coerce=lambda value: value == "true",
        empty_value=None,
        required=False,
        help_text="Opens and clicks become events your branches, waits and goals can use.",
    )

    class Meta:
        model = Workflow
        fields = ["account", "name", "description", "trigger_type", "trigger_tag", "reenrollment"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2, "placeholder": "What this workflow is for"})}

    def __init__(self, *args: Any, builder: BuilderContext | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.builder = builder or BuilderContext()
        tracking = self.instance.track_email_engagement
        self.initial["track_email_engagement"] = "" if tracking is None else str(tracking).lower()
        for name, value in layer_initial(self.instance.sending_rules, SENDING, channels=True).items():
            self.initial.setdefault(name, value)
        self.sending_rules: dict[str, Any] = {}
        events = [(name, EVENT_LABELS.get(name, name)) for name in BUILTIN_EVENTS]
        custom = [(name, f"{name} (custom event)") for name in self.builder.known_events if name not in BUILTIN_EVENTS]
        cast(forms.ChoiceField, self.fields["trigger_event"]).choices = [
            ("", "— choose —"),
            ("Relay's events", events),
            *([("Your app's events", custom)] if custom else []),
            (OTHER_EVENT, "Another event your app sends…"),
        ]
        stored = self.instance.trigger_event if self.instance.pk else ""
        if stored and stored not in BUILTIN_EVENTS and stored not in self.builder.known_events:
            self.initial["trigger_event"], self.initial["trigger_custom_event"] = OTHER_EVENT, stored
        elif stored:
            self.initial["trigger_event"] = stored
        self.fields["trigger_tag"].widget = TagInput(attrs={"placeholder": "any tag"}, list_id=ACCOUNT_TAGS_LIST)
        if not self.instance.pk:
            self.initial["trigger_type"] = "event"
        self.fields["trigger_tag"].help_text = "Only this tag; leave empty for any tag."
        self.fields["trigger_filter"].widget = ConditionRowsWidget(
            field_choices=condition_fields(self.builder, trigger_data=False, steps_group=False),
            operators=operator_choices(),
        )
        self.fields["trigger_filter"].help_text = "Every condition must hold when the event happens. None: everyone."
        if self.instance.pk:
            self.initial["trigger_filter"] = self.instance.trigger_filter
            self.initial["goals"] = [
                {"name": g.get("name", ""), "conditions": g.get("conditions") or [], "next": _shown_then(g.get("then"))}
                for g in (getattr(self.instance, "goals", None) or [])
                if isinstance(g, dict)
            ]
        if not goals_supported():
            del self.fields["goals"]
            return
        self.fields["goals"].widget = ConditionBlocksWidget(
            conditions=ConditionRowsWidget(
                field_choices=condition_fields(self.builder, event_data=True, trigger_data=False, steps_group=False),
                operators=operator_choices(),
            ),
            target=StepChoiceWidget(steps=self.builder.steps, blank_label="End the run: goal met", end_label=""),
            block_label="Goal",
            name_placeholder="e.g. Bought",
            when_label="The contact meets it when all of these hold",
            target_label="go to",
            add_label="Add a goal",
        )
        if "account" in self.fields:
            self.fields["account"].help_text = ""

    def goal_list(self) -> list[dict[str, Any]]:
        """The goals as the CONTRACT reads them: [{"name", "conditions", "then"}], "then" "$end" by default."""
        return [
            {
                "name": goal["name"],
                "conditions": goal["conditions"],
                "then": goal["next"] if goal["next"] != "" else END,
            }
            for goal in self.cleaned_data.get("goals") or []
        ]

    def event_name(self) -> str:
        data = self.cleaned_data
        if data.get("trigger_type") != "event":
            return ""
        if data.get("trigger_event") == OTHER_EVENT:
            return (data.get("trigger_custom_event") or "").strip()
        return data.get("trigger_event") or ""

    def trigger(self) -> dict[str, Any]:
        data = self.cleaned_data
        is_event = data.get("trigger_type") == "event"
        return {
            "type": data.get("trigger_type") or "manual",
            "event": self.event_name(),
            "tag": (data.get("trigger_tag") or "") if is_event and self.event_name().startswith("tag.") else "",
            "filter": data.get("trigger_filter") or [] if is_event else [],
        }

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        self.sending_rules = layer_document(self, data, SENDING, channels=True)
        layer_problems(self, self.sending_rules, SENDING, channels=True)
        declared = [self.event_name()] if data.get("trigger_event") == OTHER_EVENT and self.event_name() else []
        if data.get("trigger_type") == "event" and data.get("trigger_event") == OTHER_EVENT and not declared:
            self.add_error("trigger_custom_event", "Type the name of the event your app sends.")
            return data
        goals = self.goal_list() if "goals" in self.fields and "goals" in data else None
        steps_posted = self.posted_step_keys()
        try:
            check_workflow(
                name=data.get("name", self.instance.name),
                description=data.get("description", ""),
                trigger=self.trigger(),
                reenrollment=data.get("reenrollment") or "never",
                steps=[],  # the steps' own formset checks them
                known_events=frozenset([*self.builder.known_events, *declared]),
                **({"goals": goals} if goals is not None else {}),
            )
        except WorkflowValidationError as exc:
            for error in exc.errors:
                goal = _GOAL_THEN.fullmatch(error.path)
                if goal and goals and goals[int(goal.group(1))]["then"] in steps_posted:
                    continue  # a step of the page: checked again with the steps when the service saves both
                self._place(error.path, error.reason)
        return data

    def posted_step_keys(self) -> frozenset[str]:
        """The keys of the steps the page posted (a goal may jump to one of them)."""
        if not self.is_bound:
            return frozenset()
        keys = set()
        for name, value in self.data.items():
            match = _POSTED_KEY.fullmatch(name)
            if match and value and not self.data.get(f"steps-{match.group(1)}-DELETE"):
                keys.add(str(value).strip())
        return frozenset(keys)

    def _place(self, path: str, reason: str) -> None:
        text = reason[:1].upper() + reason[1:]
        if path == "trigger.event":
            field = "trigger_custom_event" if self.cleaned_data.get("trigger_event") == OTHER_EVENT else "trigger_event"
            self.add_error(field, text)
        elif path == "trigger.tag":
            self.add_error("trigger_tag", text)
        elif match := _CONDITION_PATH.match(path):
            part = f" ({match.group(2)})" if match.group(2) else ""
            self.add_error("trigger_filter", f"Condition {int(match.group(1)) + 1}{part}: {reason}")
        elif _GOAL_PATH.match(path) and "goals" in self.fields:
            self.add_error("goals", f"{where_in_list(path)}: {reason}")
        elif path.startswith("goals"):
            self.add_error("goals", text)
        elif path.startswith("trigger.filter"):
            self.add_error("trigger_filter", text)
        elif path in ("name", "description", "reenrollment") and path in self.fields:
            self.add_error(path, text)
        elif path.startswith("trigger"):
            self.add_error("trigger_type", text)
        else:
            self.add_error(None, f"{path}: {reason}")


# The workflow's sending overrides, declared on the class so the admin's fieldsets may name them.
declare_fields(WorkflowForm, layer_fields(SENDING, channels=True, under="the account's sending settings"))
