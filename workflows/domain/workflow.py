"""A workflow and its versions: what a marketer edits, and what publishing freezes.

The draft (trigger, re-enrollment rule, ordered steps) is edited freely.
Publishing checks it and freezes it as an immutable, numbered version; the
workflow's new runs start on its latest version, and a run keeps the
version it started with to its end, however often the draft changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from workflows.domain.actions import (
    MAX_STEP_NAME,
    MAX_STEPS,
    ActionConfig,
    ActionType,
    RetryOverrides,
    parse_action_config,
    parse_retry_overrides,
)
from workflows.domain.errors import FieldError, IllegalWorkflowTransition, WorkflowValidationError
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
    action_type: ActionType
    config: ActionConfig  # typed, checked
    retry: RetryOverrides
    raw_config: Mapping[str, Any]  # as stored

    @property
    def label(self) -> str:
        return self.name or self.action_type.value


@dataclass(frozen=True)
class WorkflowDefinition:
    """What one version freezes: who enters, whether again, and the steps in order."""

    trigger: Trigger
    reenrollment: Reenrollment
    steps: tuple[Step, ...]


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
) -> WorkflowDefinition:
    """Check a whole workflow; raise WorkflowValidationError listing every problem, each with its path."""
    errors: list[FieldError] = []
    trigger_reader = Reader(trigger if trigger is not None else {}, "trigger", context)
    parsed_trigger = parse_trigger(trigger_reader)
    errors.extend(trigger_reader.errors)
    rule = Reenrollment.NEVER
    if reenrollment not in (None, ""):
        try:
            rule = Reenrollment(reenrollment)
        except ValueError:
            errors.append(FieldError("reenrollment", f"must be one of: {', '.join(r.value for r in Reenrollment)}"))
    parsed_steps = _parse_steps(steps if steps is not None else [], context, "steps", errors)
    if require_steps and not parsed_steps and not any(e.path.startswith("steps") for e in errors):
        errors.append(FieldError("steps", "a workflow needs at least one step to be published"))
    if errors:
        raise WorkflowValidationError(errors)
    return WorkflowDefinition(trigger=parsed_trigger, reenrollment=rule, steps=parsed_steps)


def _parse_steps(raw_steps: Any, context: ValidationContext, path: str, errors: list[FieldError]) -> tuple[Step, ...]:
    if not isinstance(raw_steps, Sequence) or isinstance(raw_steps, str | bytes):
        errors.append(FieldError(path, "must be a list of steps"))
        return ()
    if len(raw_steps) > MAX_STEPS:
        errors.append(FieldError(path, f"must have at most {MAX_STEPS} steps"))
        return ()
    steps = []
    for index, raw in enumerate(raw_steps):
        step_path = f"{path}[{index}]"
        step_reader = Reader(raw, step_path, context)
        name = step_reader.string("name", max_length=MAX_STEP_NAME, default="") or ""
        kind = step_reader.string("action_type", required=True, max_length=50, choices=[a.value for a in ActionType])
        step_reader.get("position")  # accepted for clients that send it; the list order decides
        step_reader.refuse_unknown(["name", "action_type", "config", "position"])
        errors.extend(step_reader.errors)
        if kind is None:
            continue
        action_type = ActionType(kind)
        config_reader = Reader(step_reader.get("config") or {}, f"{step_path}.config", context)
        config = parse_action_config(action_type, config_reader)
        retry = parse_retry_overrides(config_reader)
        errors.extend(config_reader.errors)
        if not config_reader.errors and not step_reader.errors:
            steps.append(
                Step(
                    index=index,
                    name=name,
                    action_type=action_type,
                    config=config,
                    retry=retry,
                    raw_config=dict(config_reader.raw),
                )
            )
    return tuple(steps)
