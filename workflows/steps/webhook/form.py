"""The builder's form of a webhook step: method, URL, headers as rows, a JSON body checked as you type, and the
names it marks secret; its answer's status and fields are results later conditions may read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms

from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import KeyValueField, KeyValueWidget, TemplateInput
from workflows.steps.webhook.config import WEBHOOK_METHODS

COMMON_HEADERS = ["Authorization", "Content-Type", "Accept", "X-Api-Key", "User-Agent"]


class WebhookForm(StepConfigForm):
    action_type = "webhook"
    label = "Call a webhook"
    group = "Integrations"
    description = "Send the contact's data to another system over HTTP, signed by Relay."
    keys = {"method": "method", "url": "url", "headers": "headers", "body": "body", "secrets": "secrets"}
    retries = True
    result_fields = ((".status_code", "response status", False), (".body.", "answer field…", False))

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


FORM = WebhookForm
