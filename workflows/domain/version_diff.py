"""What changed between two versions of a workflow, in words a marketer reads: plain Python.

Steps are matched by position (a linear workflow's identity today); a step whose action changed is shown
as replaced. Texts that changed show both sides; long ones show the changed lines only.
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
    return f"Step {index + 1} ({name})"


def diff_versions(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """`before` and `after`: {"trigger": {...}, "reenrollment": ..., "steps": [...]}, as versions store them."""
    changes: list[Change] = []
    trigger_a, trigger_b = before.get("trigger") or {}, after.get("trigger") or {}
    for key, label in TRIGGER_LABELS.items():
        if (trigger_a.get(key) or None) != (trigger_b.get(key) or None):
            changes.append(_value_change("Trigger", label, trigger_a.get(key), trigger_b.get(key)))
    if before.get("reenrollment") != after.get("reenrollment"):
        changes.append(_value_change("Trigger", "Re-enrollment", before.get("reenrollment"), after.get("reenrollment")))
    steps_a: Sequence[Mapping[str, Any]] = before.get("steps") or []
    steps_b: Sequence[Mapping[str, Any]] = after.get("steps") or []
    for index in range(max(len(steps_a), len(steps_b))):
        a = steps_a[index] if index < len(steps_a) else None
        b = steps_b[index] if index < len(steps_b) else None
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
        config_a, config_b = a.get("config") or {}, b.get("config") or {}
        for key in sorted({*config_a, *config_b}):
            if config_a.get(key) != config_b.get(key):
                changes.append(_value_change(where, key, config_a.get(key), config_b.get(key)))
    return changes
