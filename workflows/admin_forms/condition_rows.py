"""Condition rows as step forms and the workflow's own form take them (a branch's blocks, a custom event's
match, goals): the CONTRACT's operators' kinds of value, and whether stored conditions fit the rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.conditions import OPERATORS, is_boolean_field
from workflows.admin_forms.widgets import ConditionRowsField

VALUE_KINDS = {op: kind for op, (_label, kind) in OPERATORS.items()}


def condition_rows_field(**kwargs: Any) -> ConditionRowsField:
    """A condition rows field reading values as the CONTRACT's operators take them."""
    return ConditionRowsField(value_kinds=VALUE_KINDS, is_boolean=is_boolean_field, **kwargs)


def conditions_ok(conditions: Any) -> bool:
    """Whether stored conditions are rows the form can show (else the step opens as JSON)."""
    return isinstance(conditions, list) and all(
        isinstance(c, Mapping) and set(c) <= {"field", "op", "value"} and isinstance(c.get("field"), str)
        for c in conditions
    )
