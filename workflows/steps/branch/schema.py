"""The OpenAPI schema of a branch's config (the API's docs; the rules are config.py's)."""

from __future__ import annotations

from workflows.api.shapes import CONDITION_SCHEMA, TARGET_SCHEMA
from workflows.domain.actions import MAX_STEP_NAME
from workflows.domain.triggers import MAX_CONDITIONS

CONFIG_SCHEMA = {
    "title": "branch",
    "type": "object",
    "description": "The first branch whose conditions all hold is taken; else `default`. The values the "
    "conditions read are logged with the decision.",
    "properties": {
        "branches": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": MAX_STEP_NAME},
                    "conditions": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_CONDITIONS,
                        "items": CONDITION_SCHEMA,
                    },
                    "next": TARGET_SCHEMA,
                },
                "required": ["conditions", "next"],
            },
        },
        "default": TARGET_SCHEMA,
    },
    "required": ["branches", "default"],
}
