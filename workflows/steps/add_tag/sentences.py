"""A tag step in words: its tag (`remove_tag` says the same)."""

from __future__ import annotations

from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Tag", c.get("tag", ""))]


SENTENCES = StepSentences(lines=lines)
