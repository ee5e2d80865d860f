"""An SMS step in words: its message."""

from __future__ import annotations

from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Message", c.get("body", ""))]


SENTENCES = StepSentences(lines=lines)
