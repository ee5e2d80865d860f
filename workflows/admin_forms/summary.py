"""A step in plain lines, for whoever may only look at a workflow (its webhook credentials already hidden)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflows.domain.actions import parse_duration

_UNITS = [("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)]


def duration_words(value: Any) -> str:
    seconds = parse_duration(value) if isinstance(value, str) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return str(value)
    for unit, size in _UNITS:
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"


def step_lines(action_type: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines saying what the step does."""
    c = dict(config)
    lines: list[tuple[str, str]] = []
    if action_type == "send_email":
        lines = [("Subject", c.get("subject", "")), ("Message", c.get("text", ""))]
        if c.get("html"):
            lines.append(("HTML version", "yes"))
    elif action_type == "send_sms":
        lines = [("Message", c.get("body", ""))]
    elif action_type == "send_voice":
        lines = [("Reads", c["message"])] if c.get("message") else [("Plays", c.get("recording_url", ""))]
    elif action_type == "webhook":
        lines = [("Request", f"{c.get('method', 'POST')} {c.get('url', '')}")]
        for name, value in (c.get("headers") or {}).items():
            lines.append((f"Header {name}", str(value)))
        if c.get("body") is not None:
            lines.append(("Body", json.dumps(c["body"], ensure_ascii=False)))
    elif action_type == "wait":
        lines = [("Until", c["until"])] if c.get("until") else [("For", duration_words(c.get("duration")))]
    elif action_type == "update_contact":
        lines = [(f"Set {k}", str(v)) for k, v in (c.get("fields") or {}).items()]
        lines += [
            (f"Set custom field {k}", json.dumps(v, ensure_ascii=False))
            for k, v in (c.get("custom_fields") or {}).items()
        ]
    elif action_type in ("add_tag", "remove_tag"):
        lines = [("Tag", c.get("tag", ""))]
    else:
        lines = [("Settings", json.dumps(c, ensure_ascii=False))]
    if c.get("max_attempts"):
        lines.append(("If it fails", f"try up to {c['max_attempts']} times"))
    return lines
