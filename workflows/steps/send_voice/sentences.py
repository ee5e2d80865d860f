"""A voice call step in words: what it reads or plays."""

from __future__ import annotations

from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Reads", c["message"])] if c.get("message") else [("Plays", c.get("recording_url", ""))]


SENTENCES = StepSentences(lines=lines)
