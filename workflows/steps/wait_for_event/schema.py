"""The OpenAPI schema of a wait for an event's config (the API's docs; the rules are config.py's)."""

from __future__ import annotations

from workflows.api.shapes import TARGET_SCHEMA

CONFIG_SCHEMA = {
    "title": "wait_for_event",
    "type": "object",
    "description": "Wait until an event happens to the contact (the step's `next`), or `timeout` passes "
    "(`on_timeout`). `match` per event: tag.added/tag.removed {tag}; contact.updated {field, value?}; "
    "email.opened {step?}; email.clicked {step?, link?}; sms.replied {contains?}; a custom event {conditions}.",
    "properties": {
        "event": {"type": "string", "maxLength": 100},
        "match": {"type": "object", "additionalProperties": True},
        "timeout": {
            "description": 'A number of seconds, or a text like "90 seconds", "3 days", "2d 12h".',
            "oneOf": [{"type": "number"}, {"type": "string"}],
        },
        "on_timeout": TARGET_SCHEMA,
    },
    "required": ["event", "timeout", "on_timeout"],
}
