"""A step in plain lines, for whoever may only look at a workflow (its webhook credentials already hidden)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
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
    elif action_type in ("branch", "split", "wait_for_event", "end"):
        lines = decision_lines(action_type, c)
    else:
        lines = [("Settings", json.dumps(c, ensure_ascii=False))]
    if c.get("max_attempts"):
        lines.append(("If it fails", f"try up to {c['max_attempts']} times"))
    return lines


def _target(key: Any) -> str:
    return "the end of the run" if key == "$end" else f"“{key}”"


def _conditions_words(conditions: Any) -> str:
    from workflows.admin_forms.conditions import OPERATORS

    parts = []
    for c in conditions or []:
        if not isinstance(c, Mapping):
            continue
        label, kind = OPERATORS.get(str(c.get("op")), (str(c.get("op")), "text"))
        value = "" if kind == "none" else f" {json.dumps(c.get('value'), ensure_ascii=False)}"
        parts.append(f"{c.get('field')} {label}{value}")
    return " and ".join(parts) or "always"


def decision_lines(action_type: str, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The lines of the steps that decide: each path, its conditions and where it leads."""
    c = dict(config)
    if action_type == "branch":
        lines = [
            (
                f"If {b.get('name') or f'branch {n}'}",
                f"{_conditions_words(b.get('conditions'))} → {_target(b.get('next'))}",
            )
            for n, b in enumerate(c.get("branches") or [], start=1)
            if isinstance(b, Mapping)
        ]
        return [*lines, ("Otherwise", f"→ {_target(c.get('default'))}")]
    if action_type == "split":
        return [
            (f"Path {p.get('name')}", f"{p.get('weight')}% → {_target(p.get('next'))}")
            for p in c.get("paths") or []
            if isinstance(p, Mapping)
        ]
    if action_type == "wait_for_event":
        match = c.get("match") or {}
        detail = ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in match.items()) if match else ""
        return [
            ("Waits for", f"{c.get('event')}" + (f" ({detail})" if detail else "")),
            ("At most", duration_words(c.get("timeout"))),
            ("If it does not happen", f"→ {_target(c.get('on_timeout'))}"),
        ]
    if action_type == "end":
        return [("Ends", "the run completes here")]
    return []


def _moment(value: Any) -> str:
    """An ISO time as the run page shows times (to the second, UTC marked)."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return moment.strftime("%-d %b %Y, %H:%M:%S") + (" UTC" if moment.utcoffset() == timedelta(0) else "")


def waiting_words(event: str, match: Mapping[str, Any]) -> str:
    """What a run waiting in a wait for an event waits for, in words (the event's label, then its match)."""
    from workflows.admin_forms.decisions import EVENT_WORDS

    said = EVENT_WORDS.get(event, f"the event {event}")
    detail = ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in (match or {}).items())
    return said + (f" ({detail})" if detail else "")


def decision_words(decision: Mapping[str, Any]) -> str:
    """A log row's decision (CONTRACT: `ExecutionLog.decision`) in a sentence a marketer reads."""
    kind = decision.get("kind")
    nxt = decision.get("next")
    then = f" → {_target(nxt)}" if nxt else ""
    if kind == "branch":
        values = decision.get("values") or {}
        why = ", ".join(f"{field} = {json.dumps(value, ensure_ascii=False)}" for field, value in values.items())
        because = f" ({why})" if why else ""
        if decision.get("default") or not decision.get("branch"):
            return f"No branch's conditions held{because}: took the default{then}"
        return f"Took the branch “{decision.get('branch')}”{because}{then}"
    if kind == "split":
        return f"Split: bucket {decision.get('bucket')} of 100, path “{decision.get('path')}”{then}"
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
    if kind == "end":
        return "Ended the run here (ended by step)"
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
