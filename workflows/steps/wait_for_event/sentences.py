"""A wait for an event in words: the event and its match, the timeout and where the run goes then; and what a
run waiting on it waits for. How the wait ended (the event or the timeout) is the engine's event wait's to say
(workflows.admin_forms.summary.decision_words)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.summary import StepSentences, duration_words, target_words
from workflows.steps.wait_for_event.form import EVENT_WORDS


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    match = c.get("match") or {}
    detail = ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in match.items()) if match else ""
    return [
        ("Waits for", f"{c.get('event')}" + (f" ({detail})" if detail else "")),
        ("At most", duration_words(c.get("timeout"))),
        ("If it does not happen", f"→ {target_words(c.get('on_timeout'))}"),
    ]


def waiting(event: str, match: Mapping[str, Any]) -> str:
    """What a run waiting here waits for, in words (the event's label, then its match)."""
    said = EVENT_WORDS.get(event, f"the event {event}")
    detail = ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in (match or {}).items())
    return said + (f" ({detail})" if detail else "")


SENTENCES = StepSentences(lines=lines, waiting=waiting)
