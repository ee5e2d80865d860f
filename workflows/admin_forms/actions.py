"""The builder's form for each of today's eight actions (registered in `steps.STEP_FORMS`).

Each says how its fields become the action's config (`to_config`) and back (`initial_from`), and which
field each config key's errors belong to (`keys`); the rules themselves are `workflows.domain.actions`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms

from workflows.admin_forms.sending import with_sending_overrides
from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, StepConfigForm, register_step_form
from workflows.admin_forms.widgets import KeyValueField, KeyValueWidget, TagInput, TemplateInput, TemplateTextarea
from workflows.domain.actions import WaitClock, parse_duration
from workflows.domain.validation import is_template
from workflows.steps.wait.config import parse_time_of_day, parse_wait_until
from workflows.steps.webhook.config import WEBHOOK_METHODS


@register_step_form
@with_sending_overrides
class SendEmailForm(StepConfigForm):
    action_type = "send_email"
    label = "Send an email"
    group = "Send"
    description = "A personalised email to the contact (skipped if they unsubscribed)."
    keys = {"subject": "subject", "text": "text", "html": "html"}
    retries = True
    previewable = True

    subject = forms.CharField(label="Subject", required=False, widget=TemplateInput())
    text = forms.CharField(
        label="Message (plain text)",
        required=False,
        widget=TemplateTextarea(),
        help_text="What every mail program shows. An unsubscribe link is added for you.",
    )
    html = forms.CharField(
        label="HTML version (optional)",
        required=False,
        widget=TemplateTextarea(attrs={"rows": 6, "class": "relay-template relay-code"}),
        help_text="Leave empty to send the plain text only. Values you insert are escaped for you.",
    )
    field_order = ["subject", "text", "html", "max_attempts", "base_delay"]

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None or not all(isinstance(v, str) for v in split[0].values()):
            return None
        own, retry = split
        return {**own, **retry}

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {"subject": data["subject"], "text": data["text"]}
        if data.get("html"):
            config["html"] = data["html"]
        return {**config, **self.retry_config()}


@register_step_form
@with_sending_overrides
class SendSmsForm(StepConfigForm):
    action_type = "send_sms"
    label = "Send an SMS"
    group = "Send"
    description = "A text message (skipped if the contact opted out)."
    keys = {"body": "body"}
    retries = True
    previewable = True

    body = forms.CharField(
        label="Message",
        required=False,
        widget=TemplateTextarea(attrs={"rows": 4, "data-sms-counter": "1"}),
        help_text="Up to 1,600 characters. Long messages are sent as several parts and cost one SMS each.",
    )
    field_order = ["body", "max_attempts", "base_delay"]

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None or not isinstance(split[0].get("body", ""), str):
            return None
        return {**split[0], **split[1]}

    def to_config(self) -> dict[str, Any]:
        return {"body": self.cleaned_data["body"], **self.retry_config()}


@register_step_form
@with_sending_overrides
class SendVoiceForm(StepConfigForm):
    action_type = "send_voice"
    label = "Place a voice call"
    group = "Send"
    description = "Call the contact and read a message or play a recording."
    keys = {"message": "message", "recording_url": "recording_url"}
    retries = True
    previewable = True
    show_if = {"message": ("mode", "message"), "recording_url": ("mode", "recording")}

    mode = forms.ChoiceField(
        label="On the call",
        choices=[("message", "Read a message aloud"), ("recording", "Play a recording")],
        initial="message",
        widget=forms.RadioSelect(attrs={"data-switch": "1"}),
        required=False,
    )
    message = forms.CharField(label="Message", required=False, widget=TemplateTextarea(attrs={"rows": 3}))
    recording_url = forms.CharField(
        label="Recording URL",
        required=False,
        widget=forms.URLInput(attrs={"class": "vURLField", "placeholder": "https://…/greeting.mp3"}),
    )
    field_order = ["mode", "message", "recording_url", "max_attempts", "base_delay"]

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None:
            return None
        own, retry = split
        mode = "recording" if own.get("recording_url") and not own.get("message") else "message"
        return {"mode": mode, **own, **retry}

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        if data.get("mode") == "recording":
            config = {"recording_url": data["recording_url"]}
        else:
            config = {"message": data["message"]}
        return {**config, **self.retry_config()}


COMMON_HEADERS = ["Authorization", "Content-Type", "Accept", "X-Api-Key", "User-Agent"]


@register_step_form
class WebhookForm(StepConfigForm):
    action_type = "webhook"
    label = "Call a webhook"
    group = "Integrations"
    description = "Send the contact's data to another system over HTTP, signed by Relay."
    keys = {"method": "method", "url": "url", "headers": "headers", "body": "body", "secrets": "secrets"}
    retries = True

    method = forms.ChoiceField(label="Method", choices=[(m, m) for m in WEBHOOK_METHODS], initial="POST")
    url = forms.CharField(
        label="URL",
        required=False,
        widget=TemplateInput(attrs={"placeholder": "https://hooks.example.com/relay", "class": "vURLField"}),
        help_text="The address and host are fixed; variables may fill in the path, e.g. …/contacts/{{ contact.id }}.",
    )
    headers = KeyValueField(
        label="Headers",
        required=False,
        widget=KeyValueWidget(
            key_label="Header", value_label="Value", add_label="Add a header", key_suggestions=COMMON_HEADERS
        ),
    )
    body = forms.CharField(
        label="Body (JSON)",
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 6,
                "class": "relay-json",
                "data-json-check": "1",
                "data-personalize": "1",
                "spellcheck": "false",
            }
        ),
        help_text="Leave empty to send Relay's standard body (the run, the step, the contact and the trigger data). "
        "Every text in it may hold variables.",
    )
    secrets = forms.CharField(
        label="Also secret",
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "e.g. X-Tenant, customer_ref", "spellcheck": "false"}),
        help_text="Names of query parameters, headers or body fields whose values are secret, comma-separated. "
        "Authorization, API keys, tokens, passwords and signatures always are. Secret values are cut from the "
        "answer shown in the run's history; branches still read the answer as it came.",
    )
    field_order = ["method", "url", "headers", "body", "secrets", "max_attempts", "base_delay"]

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None:
            return None
        own, retry = split
        headers = own.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
            return None
        secrets = own.get("secrets") or []
        if not isinstance(secrets, list) or not all(isinstance(name, str) for name in secrets):
            return None
        body = own.get("body")
        return {
            "method": own.get("method", "POST"),
            "url": own.get("url", ""),
            "headers": [(str(k), v) for k, v in headers.items()],
            "body": json.dumps(body, indent=2, ensure_ascii=False) if body is not None else "",
            "secrets": ", ".join(secrets),
            **retry,
        }

    def clean_body(self) -> Any:
        text = (self.cleaned_data.get("body") or "").strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"This is not valid JSON: {exc}.") from None

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {"method": data.get("method") or "POST", "url": data.get("url", "")}
        if data.get("headers"):
            config["headers"] = dict(data["headers"])
        if data.get("body") is not None:
            config["body"] = data["body"]
        names = [name.strip() for name in (data.get("secrets") or "").split(",") if name.strip()]
        if names:
            config["secrets"] = names
        return {**config, **self.retry_config()}


WAIT_UNITS = [("minutes", "minutes"), ("hours", "hours"), ("days", "days"), ("weeks", "weeks"), ("seconds", "seconds")]
_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400}
_UNIT_SUFFIX = {"seconds": "s", "minutes": "m", "hours": "h", "days": "d", "weeks": "w"}


@register_step_form
class WaitForm(StepConfigForm):
    action_type = "wait"
    label = "Wait"
    group = "Timing"
    description = "Pause this contact's run for a while, until a date, or until a time of day."
    keys = {"duration": "amount", "until": "until_date", "time_of_day": "at_time", "time_zone": "clock"}
    show_if = {
        "amount": ("mode", "duration"),
        "unit": ("mode", "duration"),
        "until_date": ("mode", "until"),
        "until_time": ("mode", "until"),
        "at_time": ("mode", "time_of_day"),
        "clock": ("mode", "until|time_of_day"),
    }

    mode = forms.ChoiceField(
        label="Wait",
        choices=[
            ("duration", "For a while"),
            ("until", "Until a date and time"),
            ("time_of_day", "Until a time of day (the next one)"),
        ],
        initial="duration",
        widget=forms.RadioSelect(attrs={"data-switch": "1"}),
        required=False,
    )
    amount = forms.DecimalField(
        label="For",
        required=False,
        min_value=0,
        decimal_places=3,
        widget=forms.NumberInput(attrs={"class": "vIntegerField", "min": 0, "step": "any"}),
    )
    unit = forms.ChoiceField(label="Unit", choices=WAIT_UNITS, initial="days", required=False)
    until_date = forms.DateField(label="Date", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until_time = forms.TimeField(
        label="Time", required=False, widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M")
    )
    at_time = forms.TimeField(
        label="At", required=False, widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M")
    )
    clock = forms.ChoiceField(label="In", required=False, initial=WaitClock.ACCOUNT.value)
    field_order = ["mode", "amount", "unit", "until_date", "until_time", "at_time", "clock"]

    def setup(self) -> None:
        cast(forms.ChoiceField, self.fields["clock"]).choices = [
            (WaitClock.ACCOUNT.value, f"the account's time zone ({self.builder.time_zone})"),
            (WaitClock.CONTACT.value, "the contact's time zone (its own, else its phone number's, else the account's)"),
        ]
        self.fields["at_time"].help_text = "e.g. 09:00: the run goes on the next time the clock reads it."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None:
            return None
        own = split[0]
        zone = own.get("time_zone", WaitClock.CONTACT.value)
        if "time_zone" in own and zone not in (WaitClock.CONTACT, WaitClock.ACCOUNT):
            return None  # a named zone: the form offers the account's and the contact's; JSON shows the rest
        if "time_of_day" in own:
            at = parse_time_of_day(own["time_of_day"]) if isinstance(own["time_of_day"], str) else None
            return None if at is None else {"mode": "time_of_day", "at_time": at, "clock": zone}
        if "until" in own:
            until = own["until"]
            if not isinstance(until, str) or is_template(until):
                return None
            try:
                moment = parse_wait_until(until)
            except ValueError:
                return None
            if moment.tzinfo is not None:
                if "time_zone" in own:
                    return None
                # Shown in the account's time zone by the form (`localize_until`); kept aware here.
                return {"mode": "until", "until_moment": moment, "clock": WaitClock.ACCOUNT.value}
            return {"mode": "until", "until_date": moment.date(), "until_time": moment.time(), "clock": zone}
        duration = own.get("duration")
        seconds = parse_duration(duration) if isinstance(duration, str) else duration
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            return {"mode": "duration"} if duration is None else None
        for unit in ("weeks", "days", "hours", "minutes", "seconds"):
            if seconds % _UNIT_SECONDS[unit] == 0:
                amount = seconds / _UNIT_SECONDS[unit]
                return {"mode": "duration", "amount": int(amount) if amount.is_integer() else amount, "unit": unit}
        return {"mode": "duration", "amount": seconds, "unit": "seconds"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        moment = self.initial.pop("until_moment", None)
        if moment is not None:
            local = moment.astimezone(ZoneInfo(self.builder.time_zone))
            self.initial["until_date"], self.initial["until_time"] = local.date(), local.time().replace(tzinfo=None)

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        if data.get("mode") == "until":
            if not data.get("until_date"):
                self.add_error("until_date", "Choose the date to wait until.")
        elif data.get("mode") == "time_of_day":
            if not data.get("at_time"):
                self.add_error("at_time", "Choose the time of day, e.g. 09:00.")
        elif data.get("amount") in (None, ""):
            self.add_error("amount", "Say how long to wait, e.g. 3 days.")
        return data

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        clock = data.get("clock") or WaitClock.ACCOUNT.value
        if data.get("mode") == "until":
            when = datetime.combine(data["until_date"], data.get("until_time") or datetime.min.time())
            if clock == WaitClock.CONTACT:  # a wall-clock time, read on each contact's clock when the wait begins
                return {"until": when.isoformat(), "time_zone": WaitClock.CONTACT.value}
            aware = when.replace(tzinfo=ZoneInfo(self.builder.time_zone))
            return {"until": aware.isoformat()}
        if data.get("mode") == "time_of_day":
            return {"time_of_day": data["at_time"].strftime("%H:%M"), "time_zone": clock}
        amount = data["amount"]
        number = int(amount) if amount == int(amount) else float(amount)
        return {"duration": f"{number}{_UNIT_SUFFIX[data.get('unit') or 'days']}"}


@register_step_form
class UpdateContactForm(StepConfigForm):
    action_type = "update_contact"
    label = "Update the contact"
    group = "Contact"
    description = "Set contact fields or custom fields, e.g. lifecycle stage = customer."
    keys = {"fields": "contact_fields", "custom_fields": "custom_field_values"}

    contact_fields = KeyValueField(label="Contact fields", required=False)
    custom_field_values = KeyValueField(label="Custom fields", required=False)

    def setup(self) -> None:
        self.fields["contact_fields"].widget = KeyValueWidget(
            key_label="Field",
            value_label="New value",
            add_label="Set a field",
            key_choices=self.builder.contact_field_choices,
        )
        self.fields["custom_field_values"].widget = KeyValueWidget(
            key_label="Custom field",
            value_label="New value",
            add_label="Set a custom field",
            key_suggestions=self.builder.custom_fields,
        )
        self.fields["custom_field_values"].help_text = "A new name creates the custom field on the contact."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None:
            return None
        own = split[0]
        fields, custom = own.get("fields") or {}, own.get("custom_fields") or {}
        if not isinstance(fields, Mapping) or not isinstance(custom, Mapping):
            return None
        if not all(isinstance(v, str) for v in [*fields.values(), *custom.values()]):
            return None  # a number or a list in a custom field: shown as JSON, where its type is kept
        return {"contact_fields": list(fields.items()), "custom_field_values": list(custom.items())}

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        if not self.errors and not data.get("contact_fields") and not data.get("custom_field_values"):
            self.add_error("contact_fields", "Set at least one field or custom field.")
        return data

    def to_config(self) -> dict[str, Any]:
        data = self.cleaned_data
        config: dict[str, Any] = {}
        if data.get("contact_fields"):
            config["fields"] = dict(data["contact_fields"])
        if data.get("custom_field_values"):
            config["custom_fields"] = dict(data["custom_field_values"])
        return config


class _TagForm(StepConfigForm):
    group = "Contact"
    keys = {"tag": "tag"}
    tag = forms.CharField(label="Tag", required=False)

    def setup(self) -> None:
        self.fields["tag"].widget = TagInput(attrs={"placeholder": "e.g. engaged"}, list_id=ACCOUNT_TAGS_LIST)
        self.fields["tag"].help_text = "Pick one of the account's tags or type a new one."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None or not isinstance(split[0].get("tag", ""), str):
            return None
        return {"tag": split[0].get("tag", "")}

    def to_config(self) -> dict[str, Any]:
        return {"tag": self.cleaned_data["tag"]}


@register_step_form
class AddTagForm(_TagForm):
    action_type = "add_tag"
    label = "Add a tag"
    description = "Tag the contact (other workflows may start on it)."


@register_step_form
class RemoveTagForm(_TagForm):
    action_type = "remove_tag"
    label = "Remove a tag"
    description = "Take a tag off the contact."
