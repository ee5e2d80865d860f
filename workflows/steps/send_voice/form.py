"""The builder's form of a voice call step: a message read aloud or a recording played."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from workflows.admin_forms.sending import with_sending_overrides
from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import TemplateTextarea


@with_sending_overrides
class SendVoiceForm(StepConfigForm):
    action_type = "send_voice"
    label = "Place a voice call"
    group = "Send"
    description = "Call the contact and read a message or play a recording."
    keys = {"message": "message", "recording_url": "recording_url"}
    retries = True
    previewable = True
    test_to_placeholder = "+15550100000"
    result_fields = ((".status", "delivery status", False),)
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


FORM = SendVoiceForm
