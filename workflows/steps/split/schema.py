"""The OpenAPI schema of a split's config (the API's docs; the rules are config.py's)."""

from __future__ import annotations

from workflows.api.shapes import TARGET_SCHEMA
from workflows.domain.actions import MAX_STEP_NAME

CONFIG_SCHEMA = {
    "title": "split",
    "type": "object",
    "description": "Weighted paths (weights 1-100 summing to 100); a run's bucket is a hash of its id, so a "
    "retry or a crash keeps its path. The bucket and the path are logged.",
    "properties": {
        "paths": {
            "type": "array",
            "minItems": 2,
            "maxItems": 10,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": MAX_STEP_NAME},
                    "weight": {"type": "integer", "minimum": 1, "maximum": 100},
                    "next": TARGET_SCHEMA,
                },
                "required": ["weight", "next"],
            },
        }
    },
    "required": ["paths"],
}
