"""The builder's form of an email step: subject, plain text and an optional HTML part; previewed and sent as a
test; its opens and clicks are results later conditions may read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from workflows.admin_forms.sending import with_sending_overrides
from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import TemplateInput, TemplateTextarea


@with_sending_overrides
class SendEmailForm(StepConfigForm):
    action_type = "send_email"
    label = "Send an email"
    group = "Send"
    description = "A personalised email to the contact (skipped if they unsubscribed)."
    keys = {"subject": "subject", "text": "text", "html": "html"}
    retries = True
    previewable = True
    test_to_placeholder = "you@example.com"
    tracks_engagement = True
    result_fields = ((".opened", "was opened", True), (".clicked", "a link was clicked", True))

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


FORM = SendEmailForm
