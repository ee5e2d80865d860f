"""The OpenAPI schema of an end step's config: none."""

from __future__ import annotations

CONFIG_SCHEMA = {
    "title": "end",
    "type": "object",
    "description": 'Ends the run at once: COMPLETED, end_reason "ended by step".',
    "properties": {},
}
