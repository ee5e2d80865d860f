"""An email step in words: its subject and message."""

from __future__ import annotations

from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    found = [("Subject", c.get("subject", "")), ("Message", c.get("text", ""))]
    if c.get("html"):
        found.append(("HTML version", "yes"))
    return found


SENTENCES = StepSentences(lines=lines)
