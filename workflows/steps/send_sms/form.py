"""The builder's form of an SMS step: the message, with a live character and part count."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from workflows.admin_forms.sending import with_sending_overrides
from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import TemplateTextarea


@with_sending_overrides
class SendSmsForm(StepConfigForm):
    action_type = "send_sms"
    label = "Send an SMS"
    group = "Send"
    description = "A text message (skipped if the contact opted out)."
    keys = {"body": "body"}
    retries = True
    previewable = True
    test_to_placeholder = "+15550100000"
    result_fields = ((".status", "delivery status", False),)

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


FORM = SendSmsForm
