"""Shapes the OpenAPI schema shares between the workflow serializers and the step types' own config schemas
(`workflows/steps/<name>/schema.py`, where a type has one): a condition, a step target."""

from __future__ import annotations

from typing import Any, cast

from api.serializers import CHECKED
from workflows.domain.triggers import ConditionOp
from workflows.steps import registry

CONDITION_OP_CHOICES = [o.value for o in ConditionOp]

CONDITION_SCHEMA = {
    "type": "object",
    "properties": {
        "field": {
            "type": "string",
            "description": "What to test: a contact field (tags, email, ...), `custom_fields.<key>`, "
            "`consent.email|sms|voice`; in a branch also `trigger.<path>` and `steps.<key>.<path>` "
            "(e.g. steps.call_api.status_code, steps.call_api.body.plan).",
        },
        "op": {"type": "string", "enum": CONDITION_OP_CHOICES},
        "value": {
            "description": "Compared with the field; text compares case-insensitively. A list for in / not_in, a "
            'number for the comparisons, an ISO 8601 date/time or a relative time ("-3 days") for before / after; '
            "none for is_set, is_not_set, exists, not_exists."
        },
    },
    "required": ["field", "op"],
    "additionalProperties": False,
    CHECKED: "the field must be one this condition may read, and the value must fit the op",
}

TARGET_SCHEMA = {
    "type": "string",
    "pattern": "^([a-z0-9_]{1,64}|\\$end)$",
    "description": 'A step key, or "$end" to end the run.',
}


def config_schemas() -> list[dict[str, Any]]:
    """Each step type's config schema (its folder's `schema.py`, `CONFIG_SCHEMA`), in the registry's order."""
    found = (registry.load_optional(name, "schema") for name in registry.STEP_TYPES)
    return [cast(dict[str, Any], module.CONFIG_SCHEMA) for module in found if module is not None]
