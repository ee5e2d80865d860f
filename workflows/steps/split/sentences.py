"""A split in words: each path's share and where it leads; and the path a run took."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.summary import StepSentences, target_words, then_words


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f"Path {p.get('name')}", f"{p.get('weight')}% → {target_words(p.get('next'))}")
        for p in c.get("paths") or []
        if isinstance(p, Mapping)
    ]


def took(decision: Mapping[str, Any]) -> str:
    return f"Split: bucket {decision.get('bucket')} of 100, path “{decision.get('path')}”{then_words(decision)}"


SENTENCES = StepSentences(lines=lines, decisions={"split": took})
