"""A branch in words: each branch's conditions and where it leads, the default; and what a run's branch took."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.summary import StepSentences, conditions_words, target_words, then_words


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    found = [
        (
            f"If {b.get('name') or f'branch {n}'}",
            f"{conditions_words(b.get('conditions'))} → {target_words(b.get('next'))}",
        )
        for n, b in enumerate(c.get("branches") or [], start=1)
        if isinstance(b, Mapping)
    ]
    return [*found, ("Otherwise", f"→ {target_words(c.get('default'))}")]


def took(decision: Mapping[str, Any]) -> str:
    then = then_words(decision)
    values = decision.get("values") or {}
    why = ", ".join(f"{field} = {json.dumps(value, ensure_ascii=False)}" for field, value in values.items())
    because = f" ({why})" if why else ""
    if decision.get("default") or not decision.get("branch"):
        return f"No branch's conditions held{because}: took the default{then}"
    return f"Took the branch “{decision.get('branch')}”{because}{then}"


SENTENCES = StepSentences(lines=lines, decisions={"branch": took})
