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
from workflows.admin_forms.conditions import is_boolean_field

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
    """Rows of (field, operator, value): a trigger's contact filter, a branch's or a goal's conditions.

    `field_choices` is grouped, as a select's optgroups: [("Contact", [("email", "Email"), ...]), ...]; an
    option ending in "." takes a path typed beside it (`trigger.` + `plan`). `operators` lists
    (op, label, value kind); the value input follows the kind (admin_forms.conditions.OPERATORS).
    Posts `<name>-field`, `<name>-path`, `<name>-op` and `<name>-value` lists, one item per row.
    """

    template_name = "workflows/widgets/condition_rows.html"

    def __init__(
        self,
        *,
        field_choices: Sequence[tuple[str, Sequence[tuple[str, str]]]] = (),
        operators: Sequence[tuple[str, str, Any]] = (),
        add_label: str = "Add a condition",
        earlier_steps: str = "",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(attrs)
        self.field_choices = [(group, list(options)) for group, options in field_choices]
        self.operators = [(op, label, _kind(kind)) for op, label, kind in operators]
        self.add_label = add_label
        self.earlier_steps = earlier_steps  # the group the browser refills with the steps before this one

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        return condition_rows_from(data, name)

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-field" not in data

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                value = []
        known = {option for _group, options in self.field_choices for option, _label in options}
        prefixes = sorted((o for o in known if o.endswith(".")), key=len, reverse=True)
        rows = []
        for row in value or []:
            if not isinstance(row, dict):
                continue
            field, path = str(row.get("field") or ""), str(row.get("path") or "")
            if field and field not in known and not path:
                prefix = next((p for p in prefixes if field.startswith(p) and len(field) > len(p)), None)
                if prefix:
                    field, path = prefix, field[len(prefix) :]
            rows.append(
                {"field": field, "path": path, "op": row.get("op") or "", "value": _shown_value(row.get("value"))}
            )
        extra = [(row["field"], row["field"]) for row in rows if row["field"] and row["field"] not in known]
        groups = [
            (group, [(option, label, is_boolean_field(option)) for option, label in options])
            for group, options in [*self.field_choices, *([("Other", extra)] if extra else [])]
        ]
        context.update(
            rows=[*rows, {"field": "", "path": "", "op": "equals", "value": ""}],
            groups=groups,
            operators=self.operators,
            add_label=self.add_label,
            earlier_steps=self.earlier_steps,
        )
        return context


def _kind(kind: Any) -> str:
    """Operators given as (op, label, needs_value) still work: True is a text value, False none."""
    if isinstance(kind, bool):
        return "text" if kind else "none"
    return str(kind)


def condition_rows_from(data: Any, name: str) -> list[dict[str, Any]]:
    """The rows a condition widget posted (empty rows dropped), before they are read as values."""
    getlist = data.getlist if hasattr(data, "getlist") else (lambda key: data.get(key, []))
    fields, paths = getlist(f"{name}-field"), getlist(f"{name}-path")
    ops, values = getlist(f"{name}-op"), getlist(f"{name}-value")
    rows = []
    for index, field in enumerate(fields):
        path = paths[index] if index < len(paths) else ""
        op = ops[index] if index < len(ops) else ""
        value = values[index] if index < len(values) else ""
        if field or str(value).strip() or str(path).strip():
            rows.append({"field": field, "path": str(path).strip(), "op": op, "value": value})
    return rows


def _shown_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_shown_value(item) for item in value)
    return str(value)


class ConditionRowsField(forms.Field):
    """Rows as the domain reads conditions: numbers for numeric operators, lists for `in`, true/false for
    yes/no fields, no value for `is set`; a path typed beside a "trigger data…" choice joins its field."""

    widget = ConditionRowsWidget

    def __init__(
        self,
        *,
        boolean_fields: Sequence[str] = (),
        numeric_ops: Sequence[str] = (),
        value_kinds: dict[str, str] | None = None,
        is_boolean: Any = None,
        **kwargs: Any,
    ) -> None:
        self.boolean_fields = frozenset(boolean_fields)
        self.numeric_ops = frozenset(numeric_ops)
        self.no_value_ops: frozenset[str] = frozenset()
        self.value_kinds = dict(value_kinds or {})  # op -> kind; wins over numeric_ops / no_value_ops
        self.is_boolean = is_boolean  # a callable(field) -> bool, beside boolean_fields
        super().__init__(**kwargs)

    def kind_of(self, op: str) -> str:
        if op in self.value_kinds:
            return self.value_kinds[op]
        if op in self.no_value_ops:
            return "none"
        return "number" if op in self.numeric_ops else "text"

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        if isinstance(value, str):
            value = json.loads(value or "[]")
        conditions = []
        for number, row in enumerate(value or [], start=1):
            field, op, raw = row.get("field", ""), row.get("op", ""), row.get("value", "")
            path = str(row.get("path") or "").strip()
            if field.endswith(".") and field not in ("",):
                if not path:
                    raise ValidationError(f"Condition {number}: type the name of the value after “{field}”.")
                field = field + path
            if not field:
                raise ValidationError(f"Condition {number}: choose what to test (or empty the row to drop it).")
            condition: dict[str, Any] = {"field": field, "op": op}
            kind = self.kind_of(op)
            boolean = field in self.boolean_fields or bool(self.is_boolean and self.is_boolean(field))
            if kind == "none":
                condition["value"] = None
            elif kind == "number":
                condition["value"] = _number(raw)
            elif kind == "list":
                items = raw if isinstance(raw, list) else [part.strip() for part in str(raw).split(",")]
                condition["value"] = [item for item in items if item != ""]
            elif boolean and isinstance(raw, str) and raw.strip().lower() in ("true", "false", "yes", "no"):
                condition["value"] = raw.strip().lower() in ("true", "yes")
            else:
                condition["value"] = raw if raw != "" else None
            conditions.append(condition)
        return conditions

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return (initial or []) != self.to_python(data)
        except ValidationError:
            return True


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
