"""The builder's form of a wait: for a while (an amount and a unit), until a date and time, or until a time of
day, on the account's clock or the contact's."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms

from workflows.admin_forms.steps import StepConfigForm
from workflows.domain.actions import WaitClock, parse_duration
from workflows.domain.validation import is_template
from workflows.steps.wait.config import parse_time_of_day, parse_wait_until

WAIT_UNITS = [("minutes", "minutes"), ("hours", "hours"), ("days", "days"), ("weeks", "weeks"), ("seconds", "seconds")]
_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400}
_UNIT_SUFFIX = {"seconds": "s", "minutes": "m", "hours": "h", "days": "d", "weeks": "w"}


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


FORM = WaitForm
