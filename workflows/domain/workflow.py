"""A workflow and its versions: what a marketer edits, and what publishing freezes.

The draft (trigger, re-enrollment rule, ordered steps) is edited freely.
Publishing checks it and freezes it as an immutable, numbered version; the
workflow's new runs start on its latest version, and a run keeps the
version it started with to its end, however often the draft changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from kernel.storable_json import find_unstorable
from workflows.domain.actions import (
    END,
    MAX_STEP_NAME,
    MAX_STEPS,
    RETRY_KEYS,
    STEP_KEY,
    RetryOverrides,
    parse_retry_overrides,
)
from workflows.domain.errors import FieldError, IllegalWorkflowTransition, WorkflowValidationError
from workflows.domain.execution import Goto
from workflows.domain.goals import Goal, parse_goals
from workflows.domain.graph import check_graph
from workflows.domain.step_types import config_type, step_type_names
from workflows.domain.triggers import Reenrollment, Trigger, parse_trigger
from workflows.domain.validation import Reader, ValidationContext


class WorkflowStatus(StrEnum):
    DRAFT = "draft"  # never published, or restored from the archive: takes no runs
    ACTIVE = "active"  # published: takes new runs on its latest version
    PAUSED = "paused"  # takes no new runs; runs in flight carry on
    ARCHIVED = "archived"  # retired: read-only, takes no new runs; runs in flight carry on


# action -> (statuses it is allowed from, status it leads to)
WORKFLOW_MOVES: dict[str, tuple[frozenset[WorkflowStatus], WorkflowStatus]] = {
    "publish": (frozenset({WorkflowStatus.DRAFT, WorkflowStatus.ACTIVE, WorkflowStatus.PAUSED}), WorkflowStatus.ACTIVE),
    "pause": (frozenset({WorkflowStatus.ACTIVE}), WorkflowStatus.PAUSED),
    "activate": (frozenset({WorkflowStatus.PAUSED}), WorkflowStatus.ACTIVE),
    "archive": (
        frozenset({WorkflowStatus.DRAFT, WorkflowStatus.ACTIVE, WorkflowStatus.PAUSED}),
        WorkflowStatus.ARCHIVED,
    ),
    "restore": (frozenset({WorkflowStatus.ARCHIVED}), WorkflowStatus.DRAFT),
}
EDITABLE = frozenset({WorkflowStatus.DRAFT, WorkflowStatus.ACTIVE, WorkflowStatus.PAUSED})


def workflow_move(current: WorkflowStatus | str, action: str, *, has_version: bool) -> WorkflowStatus:
    """The status `action` leads to from `current`, or IllegalWorkflowTransition."""
    allowed_from, target = WORKFLOW_MOVES[action]
    status = WorkflowStatus(current)
    if status not in allowed_from:
        raise IllegalWorkflowTransition(status.value, action)
    if action == "activate" and not has_version:
        raise IllegalWorkflowTransition(status.value, action, "it has never been published")
    return target


def check_editable(current: WorkflowStatus | str) -> None:
    if WorkflowStatus(current) not in EDITABLE:
        raise IllegalWorkflowTransition(WorkflowStatus(current).value, "edit", "restore it first")


@dataclass(frozen=True)
class Step:
    index: int  # 0-based position in the version
    name: str
    action_type: str  # a name of the step type registry (workflows/steps/registry.py)
    config: Any  # typed, checked: the config type of its step type (workflows/steps/<name>/config.py)
    retry: RetryOverrides
    raw_config: Mapping[str, Any]  # as stored
    key: str = ""  # stable, unique in the workflow (generated `step_<n>` when the author gave none)
    next: str = END  # the key of the step that follows (the following one in order unless said), or END
    explicit_next: str = ""  # the `next` the author wrote ("" = none: the following step)
    # Every place this step may send the run, by key (its `next`, its branches' and paths' targets, END).
    targets: Mapping[str, Goto] = field(default_factory=dict, repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.name or self.action_type

    @property
    def goto(self) -> Goto:
        """Where the run goes when this step is done (a deciding step picks among `targets` instead)."""
        return self.targets.get(self.next) or Goto(None, END)

    def goto_key(self, key: str) -> Goto:
        return self.targets.get(key) or Goto(None, END)


@dataclass(frozen=True)
class WorkflowDefinition:
    """What one version freezes: who enters, whether again, and the steps in order."""

    trigger: Trigger
    reenrollment: Reenrollment
    steps: tuple[Step, ...]
    goals: tuple[Goal, ...] = ()  # met by an event, they end a run (or move it to a step): domain/goals.py


def parse_steps(raw_steps: Any, context: ValidationContext, *, path: str = "steps") -> tuple[Step, ...]:
    errors: list[FieldError] = []
    steps = _parse_steps(raw_steps, context, path, errors)
    if errors:
        raise WorkflowValidationError(errors)
    return steps


def parse_definition(
    *,
    trigger: Any,
    reenrollment: Any,
    steps: Any,
    context: ValidationContext,
    require_steps: bool = True,
    goals: Any = None,
) -> WorkflowDefinition:
    """Check a whole workflow; raise WorkflowValidationError listing every problem, each with its path."""
    errors: list[FieldError] = []
    # What the database cannot store (a NUL, a lone surrogate, NaN), from the admin's JSON and form fields as
    # from the API: refused by its path before any other rule reads it (each step's in _parse_steps).
    for path, part in (("trigger", trigger), ("goals", goals)):
        found = find_unstorable(part, path)
        if found is not None:
            errors.append(FieldError(found.path, found.reason))
    if errors:
        raise WorkflowValidationError(errors)
    trigger_reader = Reader(trigger if trigger is not None else {}, "trigger", context)
    parsed_trigger = parse_trigger(trigger_reader)
    errors.extend(trigger_reader.errors)
    rule = Reenrollment.NEVER
    if reenrollment not in (None, ""):
        try:
            rule = Reenrollment(reenrollment)
        except ValueError:
            errors.append(FieldError("reenrollment", f"must be one of: {', '.join(r.value for r in Reenrollment)}"))
    parsed_steps = _parse_steps(
        steps if steps is not None else [], context, "steps", errors, goal_targets=_goal_targets(goals)
    )
    if require_steps and not parsed_steps and not any(e.path.startswith("steps") for e in errors):
        errors.append(FieldError("steps", "a workflow needs at least one step to be published"))
    parsed_goals = parse_goals(goals, errors, step_keys={step.key for step in parsed_steps})
    if errors:
        raise WorkflowValidationError(errors)
    return WorkflowDefinition(trigger=parsed_trigger, reenrollment=rule, steps=parsed_steps, goals=parsed_goals)


def _goal_targets(goals: Any) -> frozenset[str]:
    """The steps goals jump to: runs reach them from anywhere, so the graph counts them as reachable."""
    if not isinstance(goals, Sequence) or isinstance(goals, str | bytes):
        return frozenset()
    found = (goal.get("then") for goal in goals if isinstance(goal, Mapping))
    return frozenset(then for then in found if isinstance(then, str) and then != END)


def _parse_steps(
    raw_steps: Any,
    context: ValidationContext,
    path: str,
    errors: list[FieldError],
    *,
    goal_targets: frozenset[str] = frozenset(),
) -> tuple[Step, ...]:
    if not isinstance(raw_steps, Sequence) or isinstance(raw_steps, str | bytes):
        errors.append(FieldError(path, "must be a list of steps"))
        return ()
    if len(raw_steps) > MAX_STEPS:
        errors.append(FieldError(path, f"must have at most {MAX_STEPS} steps"))
        return ()
    steps = []
    before = len(errors)
    for index, raw in enumerate(raw_steps):
        step_path = f"{path}[{index}]"
        unstorable = find_unstorable(raw, step_path)  # a NUL in a webhook body typed as JSON, a surrogate, NaN
        if unstorable is not None:
            errors.append(FieldError(unstorable.path, unstorable.reason))
        step_reader = Reader(raw, step_path, context)
        name = step_reader.string("name", max_length=MAX_STEP_NAME, default="") or ""
        kind = step_reader.string("action_type", required=True, max_length=50, choices=step_type_names())
        key = step_reader.string(
            "key",
            max_length=64,
            pattern=STEP_KEY,
            pattern_reason="a step key is 1 to 64 of a-z, 0-9 and _ (e.g. welcome_email)",
        )
        explicit_next = step_reader.string(
            "next",
            max_length=64,
            pattern=_NEXT,
            pattern_reason=f'must be a step key (a-z, 0-9, _; at most 64) or "{END}"',
        )
        step_reader.get("position")  # accepted for clients that send it; the list order decides
        step_reader.refuse_unknown(["key", "name", "action_type", "config", "next", "position"])
        if explicit_next and kind is not None and config_type(kind).decides:
            step_reader.error(
                step_reader.at("next"),
                f"a {kind} step chooses where the run goes in its config; it has no `next` of its own",
            )
        errors.extend(step_reader.errors)
        if kind is None:
            continue
        step_type = config_type(kind)
        config_reader = Reader(step_reader.get("config") or {}, f"{step_path}.config", context)
        config = step_type.parse(config_reader)
        config_reader.refuse_unknown([*step_type.keys, *RETRY_KEYS])
        retry = parse_retry_overrides(config_reader)
        errors.extend(config_reader.errors)
        if not config_reader.errors and not step_reader.errors:
            steps.append(
                Step(
                    index=index,
                    name=name,
                    action_type=kind,
                    config=config,
                    retry=retry,
                    raw_config=dict(config_reader.raw),
                    key=key or "",
                    explicit_next=explicit_next or "",
                )
            )
    if len(errors) > before:
        return tuple(steps)  # the graph is judged once every step reads
    return _linked(steps, path, errors, goal_targets)


_NEXT = re.compile(r"[a-z0-9_]{1,64}|\$end")


def step_key_for(index: int) -> str:
    """The key a step without one gets: `step_<n>`, n its 1-based position (what old versions got too)."""
    return f"step_{index + 1}"


def _linked(
    steps: list[Step], path: str, errors: list[FieldError], goal_targets: frozenset[str] = frozenset()
) -> tuple[Step, ...]:
    """Give every step its key and its `next`, check the graph, and resolve every target to a Goto."""
    keyed: list[Step] = []
    seen: dict[str, int] = {}
    for step in steps:
        key = step.key or step_key_for(step.index)
        if key in seen:
            given = "" if step.key else " (generated for a step without a key: give this step a key)"
            errors.append(
                FieldError(f"{path}[{step.index}].key", f"{key!r} is also the key of steps[{seen[key]}]{given}")
            )
        seen.setdefault(key, step.index)
        keyed.append(replace(step, key=key))
    if errors:
        return tuple(keyed)
    linked = []
    for position, step in enumerate(keyed):
        following = keyed[position + 1].key if position + 1 < len(keyed) else END
        linked.append(replace(step, next=step.explicit_next or following))
    check_graph(linked, path, errors, also_entered=goal_targets)
    if errors:
        return tuple(linked)
    gotos = {step.key: Goto(step.index, step.key) for step in linked}
    gotos[END] = Goto(None, END)
    return tuple(replace(step, targets=gotos) for step in linked)
