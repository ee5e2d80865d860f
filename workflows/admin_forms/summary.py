"""A step in plain lines, for whoever may only look at a workflow (its webhook credentials already hidden), and a
run's decisions in sentences: each step type's words are in its folder (`sentences.py`), asked by name here."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from workflows.domain.actions import parse_duration
from workflows.steps import registry

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


@dataclass(frozen=True)
class StepSentences:
    """What a step type says in words: each type's `workflows/steps/<name>/sentences.py` (`SENTENCES`)."""

    # What the step does, as (label, value) lines, from its config as a response shows it (credentials hidden).
    lines: Callable[[dict[str, Any]], list[tuple[str, str]]]
    # A log row's decision of each kind its executor makes (CONTRACT: `ExecutionLog.decision`), in a sentence.
    decisions: Mapping[str, Callable[[Mapping[str, Any]], str]] = field(default_factory=dict)
    # What a run waiting on this step for an event waits for (its event and match), for a step that waits so.
    waiting: Callable[[str, Mapping[str, Any]], str] | None = None


def sentences_for(action_type: str) -> StepSentences | None:
    """The step type's sentences, or None for a name that is no step type (an old or foreign row)."""
    if action_type not in registry.STEP_TYPES:
        return None
    return cast(StepSentences, registry.load(action_type, "sentences").SENTENCES)


def step_lines(action_type: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines saying what the step does."""
    c = dict(config)
    sentences = sentences_for(action_type)
    lines = sentences.lines(c) if sentences is not None else [("Settings", json.dumps(c, ensure_ascii=False))]
    if c.get("max_attempts"):
        lines.append(("If it fails", f"try up to {c['max_attempts']} times"))
    return lines


def target_words(key: Any) -> str:
    return "the end of the run" if key == "$end" else f"“{key}”"


def conditions_words(conditions: Any) -> str:
    from workflows.admin_forms.conditions import OPERATORS

    parts = []
    for c in conditions or []:
        if not isinstance(c, Mapping):
            continue
        label, kind = OPERATORS.get(str(c.get("op")), (str(c.get("op")), "text"))
        value = "" if kind == "none" else f" {json.dumps(c.get('value'), ensure_ascii=False)}"
        parts.append(f"{c.get('field')} {label}{value}")
    return " and ".join(parts) or "always"


def then_words(decision: Mapping[str, Any]) -> str:
    """Where a decision sent the run, as its sentence ends: " → “key”", or nothing."""
    nxt = decision.get("next")
    return f" → {target_words(nxt)}" if nxt else ""


def _moment(value: Any) -> str:
    """An ISO time as the run page shows times (to the second, UTC marked)."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return moment.strftime("%-d %b %Y, %H:%M:%S") + (" UTC" if moment.utcoffset() == timedelta(0) else "")


def waiting_words(action_type: str, event: str, match: Mapping[str, Any]) -> str:
    """What a run waiting on a step of `action_type` for an event waits for, in words (its type's sentences)."""
    sentences = sentences_for(action_type)
    if sentences is not None and sentences.waiting is not None:
        return sentences.waiting(event, match)
    detail = ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in (match or {}).items())
    return f"the event {event}" + (f" ({detail})" if detail else "")


def decision_words(decision: Mapping[str, Any]) -> str:
    """A log row's decision (CONTRACT: `ExecutionLog.decision`) in a sentence a marketer reads."""
    kind = decision.get("kind")
    nxt = decision.get("next")
    then = then_words(decision)
    for name in registry.STEP_TYPES:  # the kinds each step type's executor decides (branch, split, end)
        sentences = sentences_for(name)
        if sentences is not None and isinstance(kind, str) and kind in sentences.decisions:
            return sentences.decisions[kind](decision)
    # The engine's own decisions: an event wait's end (any step that waits for an event), goals, retries.
    if kind == "event":
        at = _moment(decision.get("at"))
        event = decision.get("event") or "The event it waited for"  # the wait step's card names the event
        return (
            f"{event} happened"
            + (f" at {at}" if at else "")
            + (f" (event {decision.get('event_id')})" if decision.get("event_id") else "")
            + (then or ": on the “it happened” path")
        )
    if kind == "timeout":
        return f"Timed out: it did not happen in time{then or ': on the timed-out path'}"
    if kind == "goal":
        if nxt in (None, "", "$end"):
            return f"Goal met: “{decision.get('goal')}”: the run ended"
        return f"Goal met: “{decision.get('goal')}”{then}"
    if kind == "retry":
        by = decision.get("by") or {}
        who = by.get("name") or (f"API token {by['prefix']}" if by.get("prefix") else "an operator")
        at = _moment(decision.get("at"))
        reset = decision.get("loop_cap_reset") or {}
        return (
            f"Retried by {who}"
            + (f" at {at}" if at else "")
            + f": the loop cap was lifted after {reset.get('steps_before')} steps,"
            f" {reset.get('allowance')} more allowed{then}"
        )
    return json.dumps(dict(decision), ensure_ascii=False)
