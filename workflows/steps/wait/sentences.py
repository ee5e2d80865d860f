"""A wait in words: until when, or for how long."""

from __future__ import annotations

from typing import Any

from workflows.admin_forms.summary import StepSentences, duration_words


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Until", c["until"])] if c.get("until") else [("For", duration_words(c.get("duration")))]


SENTENCES = StepSentences(lines=lines)
