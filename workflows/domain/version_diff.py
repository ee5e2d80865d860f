"""What changed between two versions of a workflow, in words a marketer reads: plain Python.

Steps are matched by key (their identity in the graph, #11; by position for steps without keys) and named
by it; a step whose action changed is shown as replaced, one that moved says where to.
Texts that changed show both sides; long ones show the changed lines only.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TRIGGER_LABELS = {"type": "Trigger", "event": "Event", "tag": "Tag", "filter": "Contact filter"}


@dataclass(frozen=True)
class Change:
    where: str  # "Trigger", "Step 2 (Welcome email)"
    what: str  # "subject", "added", "removed", "action"
    before: str = ""
    after: str = ""
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" " | "-" | "+", line) for long texts


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value_change(where: str, what: str, before: Any, after: Any) -> Change:
    a, b = _shown(before), _shown(after)
    if "\n" in a or "\n" in b or len(a) > 160 or len(b) > 160:
        diff = difflib.ndiff(a.splitlines(), b.splitlines())
        lines = [(line[0], line[2:]) for line in diff if line[:1] in ("-", "+", " ") and line[:2] != "? "]
        return Change(where, what, lines=[(m, t) for m, t in lines if m != " " or len(lines) < 40])
    return Change(where, what, a, b)


def _step_label(index: int, step: Mapping[str, Any]) -> str:
    name = step.get("name") or step.get("action_type", "")
    key = step.get("key")
    return f"Step {key} ({name})" if key else f"Step {index + 1} ({name})"


def _pairs(
    steps_a: Sequence[Mapping[str, Any]], steps_b: Sequence[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, int]]:
    """(before, after, position) for each step: by key when every step has one, else by position."""
    keyed = all(isinstance(s, Mapping) and s.get("key") for s in [*steps_a, *steps_b])
    if not keyed:
        count = max(len(steps_a), len(steps_b))
        return [
            (steps_a[i] if i < len(steps_a) else None, steps_b[i] if i < len(steps_b) else None, i)
            for i in range(count)
        ]
    by_key_a = {s["key"]: s for s in steps_a}
    keys_b = {s["key"] for s in steps_b}
    pairs: list[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None, int]] = [
        (by_key_a.get(s["key"]), s, i) for i, s in enumerate(steps_b)
    ]
    pairs += [(s, None, i) for i, s in enumerate(steps_a) if s["key"] not in keys_b]
    return pairs


def _goal_changes(goals_a: Sequence[Any], goals_b: Sequence[Any]) -> list[Change]:
    """Goals matched by name (unique in a workflow): added, removed, or what changed in one."""
    by_name_a = {g.get("name"): g for g in goals_a if isinstance(g, Mapping)}
    by_name_b = {g.get("name"): g for g in goals_b if isinstance(g, Mapping)}
    changes = []
    for name in [*by_name_b, *(n for n in by_name_a if n not in by_name_b)]:
        a, b = by_name_a.get(name), by_name_b.get(name)
        where = f"Goal “{name}”"
        if a is None:
            changes.append(Change(where, "added"))
        elif b is None:
            changes.append(Change(where, "removed"))
        else:
            for key, label in (("conditions", "conditions"), ("then", "then")):
                if a.get(key) != b.get(key):
                    changes.append(_value_change(where, label, a.get(key), b.get(key)))
    return changes


def diff_versions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """`before` and `after`: {"trigger": {...}, "reenrollment": ..., "steps": [...]}, as versions store them."""
    changes: list[Change] = []
    trigger_a, trigger_b = before.get("trigger") or {}, after.get("trigger") or {}
    for key, label in TRIGGER_LABELS.items():
        if (trigger_a.get(key) or None) != (trigger_b.get(key) or None):
            changes.append(_value_change("Trigger", label, trigger_a.get(key), trigger_b.get(key)))
    if before.get("reenrollment") != after.get("reenrollment"):
        changes.append(_value_change("Trigger", "Re-enrollment", before.get("reenrollment"), after.get("reenrollment")))
    changes += _goal_changes(before.get("goals") or [], after.get("goals") or [])
    steps_a: Sequence[Mapping[str, Any]] = before.get("steps") or []
    steps_b: Sequence[Mapping[str, Any]] = after.get("steps") or []
    positions_a = {s.get("key"): i for i, s in enumerate(steps_a) if isinstance(s, Mapping)}
    for a, b, index in _pairs(steps_a, steps_b):
        if a is not None and b is not None and b.get("key") and positions_a.get(b.get("key")) != index:
            where = _step_label(index, b)
            changes.append(Change(where, "position", str(positions_a[b.get("key")] + 1), str(index + 1)))
        if a == b:
            continue
        if a is None:
            assert b is not None  # a and b differ
            changes.append(Change(_step_label(index, b), "added", after=b.get("action_type", "")))
            continue
        if b is None:
            changes.append(Change(_step_label(index, a), "removed", before=a.get("action_type", "")))
            continue
        where = _step_label(index, b)
        if a.get("action_type") != b.get("action_type"):
            changes.append(Change(where, "action", a.get("action_type", ""), b.get("action_type", "")))
            continue
        if (a.get("name") or "") != (b.get("name") or ""):
            changes.append(_value_change(where, "name", a.get("name"), b.get("name")))
        if (a.get("next") or None) != (b.get("next") or None):
            changes.append(
                _value_change(
                    where, "next step", a.get("next") or "the next in order", b.get("next") or "the next in order"
                )
            )
        config_a, config_b = a.get("config") or {}, b.get("config") or {}
        for key in sorted({*config_a, *config_b}):
            if config_a.get(key) != config_b.get(key):
                changes.append(_value_change(where, key, config_a.get(key), config_b.get(key)))
    return changes
