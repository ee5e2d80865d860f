"""The builder's form of an update of the contact: contact fields and custom fields as rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import KeyValueField, KeyValueWidget


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


FORM = UpdateContactForm
