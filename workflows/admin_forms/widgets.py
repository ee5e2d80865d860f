"""Widgets of the builder: rows of key/value pairs, rows of conditions, tag pickers, template inputs.

Each renders plain inputs that post without JavaScript (rows already there, plus a blank one);
`workflows/static/workflows/builder.js` adds rows, chips and pickers on top.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from contacts.admin_widgets import TagInput, TagListField, TagListWidget

__all__ = ["TagInput", "TagListField", "TagListWidget"]  # the contacts' tag widgets, shared by the builder


class TemplateInput(forms.TextInput):
    """A one-line text that may hold {{ variables }}: the personalisation picker attaches to it."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"data-personalize": "1", "class": "vTextField relay-template", **(attrs or {})})


class TemplateTextarea(forms.Textarea):
    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"data-personalize": "1", "class": "relay-template", "rows": 6, **(attrs or {})})


class KeyValueWidget(forms.Widget):
    """Rows of (key, value): webhook headers, contact fields to set. Posts `<name>-key` / `<name>-value` lists."""

    template_name = "workflows/widgets/key_value.html"

    def __init__(
        self,
        *,
        key_label: str = "Name",
        value_label: str = "Value",
        add_label: str = "Add a row",
        key_choices: Sequence[tuple[str, str]] | None = None,
        key_suggestions: Sequence[str] = (),
        personalize: bool = True,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(attrs)
        self.key_label, self.value_label, self.add_label = key_label, value_label, add_label
        self.key_choices = list(key_choices) if key_choices is not None else None
        self.key_suggestions = list(key_suggestions)
        self.personalize = personalize

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[tuple[str, str]]:
        keys = data.getlist(f"{name}-key") if hasattr(data, "getlist") else data.get(f"{name}-key", [])
        values = data.getlist(f"{name}-value") if hasattr(data, "getlist") else data.get(f"{name}-value", [])
        rows = []
        for index, key in enumerate(keys):
            value = values[index] if index < len(values) else ""
            if str(key).strip() or str(value).strip():
                rows.append((str(key).strip(), str(value)))
        return rows

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-key" not in data

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        rows = list(value or [])
        context.update(
            rows=[*rows, ("", "")],
            key_label=self.key_label,
            value_label=self.value_label,
            add_label=self.add_label,
            key_choices=self.key_choices,
            key_suggestions=self.key_suggestions,
            personalize=self.personalize,
            suggestions_id=f"{context['widget']['attrs'].get('id', name)}-keys",
        )
        return context


class KeyValueField(forms.Field):
    widget = KeyValueWidget

    def to_python(self, value: Any) -> list[tuple[str, str]]:
        rows = list(value or [])
        seen: set[str] = set()
        for key, _value in rows:
            if not key:
                raise ValidationError("Every row needs a name (or leave both boxes empty to drop the row).")
            folded = key.lower()
            if folded in seen:
                raise ValidationError(f"“{key}” is there twice: keep one row for it.")
            seen.add(folded)
        return rows

    def has_changed(self, initial: Any, data: Any) -> bool:
        return list(initial or []) != list(data or [])


class ConditionRowsWidget(forms.Widget):
    """Rows of (field, operator, value): a trigger's contact filter today; branch and goal conditions next.

    `field_choices` is grouped, as a select's optgroups: [("Contact", [("email", "Email"), ...]), ...].
    `operators` lists (value, label, needs_value).
    """

    template_name = "workflows/widgets/condition_rows.html"

    def __init__(
        self,
        *,
        field_choices: Sequence[tuple[str, Sequence[tuple[str, str]]]] = (),
        operators: Sequence[tuple[str, str, bool]] = (),
        add_label: str = "Add a condition",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(attrs)
        self.field_choices = [(group, list(options)) for group, options in field_choices]
        self.operators = list(operators)
        self.add_label = add_label

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        getlist = data.getlist if hasattr(data, "getlist") else (lambda key: data.get(key, []))
        fields, ops, values = getlist(f"{name}-field"), getlist(f"{name}-op"), getlist(f"{name}-value")
        rows = []
        for index, field in enumerate(fields):
            op = ops[index] if index < len(ops) else ""
            value = values[index] if index < len(values) else ""
            if field or value:
                rows.append({"field": field, "op": op, "value": value})
        return rows

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-field" not in data

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = []
        rows = [{**row, "value": _shown_value(row.get("value"))} for row in (value or []) if isinstance(row, dict)]
        known = {option for _group, options in self.field_choices for option, _label in options}
        extra = [(row["field"], row["field"]) for row in rows if row.get("field") and row["field"] not in known]
        groups = [*self.field_choices, *([("Other", extra)] if extra else [])]
        context.update(
            rows=[*rows, {"field": "", "op": "equals", "value": ""}],
            groups=groups,
            operators=self.operators,
            add_label=self.add_label,
        )
        return context


def _shown_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ConditionRowsField(forms.Field):
    """Rows as the domain reads conditions: numbers for numeric operators, true/false for yes/no fields."""

    widget = ConditionRowsWidget

    def __init__(self, *, boolean_fields: Sequence[str] = (), numeric_ops: Sequence[str] = (), **kwargs: Any) -> None:
        self.boolean_fields = frozenset(boolean_fields)
        self.numeric_ops = frozenset(numeric_ops)
        self.no_value_ops: frozenset[str] = frozenset()
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        if isinstance(value, str):
            value = json.loads(value or "[]")
        conditions = []
        for row in value or []:
            field, op, raw = row.get("field", ""), row.get("op", ""), row.get("value", "")
            condition: dict[str, Any] = {"field": field, "op": op}
            if op in self.no_value_ops:
                condition["value"] = None
            elif op in self.numeric_ops:
                condition["value"] = _number(raw)
            elif field in self.boolean_fields and isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                condition["value"] = raw.strip().lower() == "true"
            else:
                condition["value"] = raw if raw != "" else None
            conditions.append(condition)
        return conditions

    def has_changed(self, initial: Any, data: Any) -> bool:
        return (initial or []) != self.to_python(data)


def _number(raw: Any) -> Any:
    if isinstance(raw, int | float):
        return raw
    text = str(raw).strip()
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text  # the domain names it: "must be a number"
