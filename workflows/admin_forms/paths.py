"""Widgets for where a run goes next: a step choice, branches (or goals) as blocks of conditions, split paths.

Each posts plain inputs (no JSON): a step choice is a select of the workflow's steps by key, refilled in
the browser as steps are added, renamed or moved (`builder.js`, `data-step-choice`); the server renders
the steps it knows and keeps whatever value was chosen. Blocks post `<name>-<i>-...` inputs, rows post
lists; both read back in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from workflows.admin_forms.context import StepRef
from workflows.admin_forms.widgets import ConditionRowsField, ConditionRowsWidget, condition_rows_from

END = "$end"  # CONTRACT: a `next` (or a goal's `then`) that ends the run
STEP_KEY = re.compile(r"[a-z0-9_]{1,64}")
MAX_BLOCKS = 50


def step_choice_label(number: int, step: StepRef) -> str:
    return f"{number}. {step.label} ({step.key})"


class StepChoiceWidget(forms.Widget):
    """A select of the workflow's steps (and "end the run"), by key."""

    template_name = "workflows/widgets/step_choice.html"

    def __init__(
        self,
        *,
        steps: Sequence[StepRef] = (),
        blank_label: str = "",
        end_label: str = "End the run",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        """`end_label` "" offers no "end the run" of its own (a goal's blank choice ends the run)."""
        super().__init__(attrs)
        self.steps = list(steps)
        self.blank_label, self.end_label = blank_label, end_label

    def format_value(self, value: Any) -> str:
        return "" if value is None else str(value)

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        current = self.format_value(value)
        options = [(step.key, step_choice_label(n, step)) for n, step in enumerate(self.steps, start=1)]
        if current and current != END and current not in {key for key, _label in options}:
            options.append((current, current))
        context.update(
            current=current,
            options=options,
            blank_label=self.blank_label,
            end_label=self.end_label,
            end=END,
        )
        return context


class StepChoiceField(forms.CharField):
    """A step's key, or "$end"; blank where the field allows it (the following step)."""

    def __init__(self, *, blank_label: str = "", end_label: str = "End the run", **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", StepChoiceWidget(blank_label=blank_label, end_label=end_label))
        super().__init__(**kwargs)

    def set_steps(self, steps: Sequence[StepRef]) -> None:
        widget = self.widget
        if isinstance(widget, StepChoiceWidget):
            widget.steps = list(steps)

    def clean(self, value: Any) -> str:
        text = (super().clean(value) or "").strip()
        if text and text != END and not STEP_KEY.fullmatch(text):
            raise ValidationError("Choose one of the workflow's steps.")
        return text


# --- branches and goals: blocks of (name, conditions, where to go) -----------------------------------
class ConditionBlocksWidget(forms.Widget):
    """Ordered blocks, each a name, condition rows and a step choice: a branch's branches, a workflow's goals."""

    template_name = "workflows/widgets/condition_blocks.html"

    def __init__(
        self,
        *,
        conditions: ConditionRowsWidget,
        target: StepChoiceWidget,
        block_label: str = "Branch",
        name_placeholder: str = "e.g. Clicked",
        when_label: str = "When all of these hold",
        target_label: str = "go to",
        add_label: str = "Add a branch",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(attrs)
        self.conditions, self.target = conditions, target
        self.block_label, self.name_placeholder = block_label, name_placeholder
        self.when_label, self.target_label, self.add_label = when_label, target_label, add_label

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        blocks = []
        for index in range(MAX_BLOCKS):
            prefix = f"{name}-{index}"
            if f"{prefix}-name" not in data and f"{prefix}-next" not in data:
                continue
            block = {
                "name": str(data.get(f"{prefix}-name", "")).strip(),
                "conditions": condition_rows_from(data, f"{prefix}-when"),
                "next": str(data.get(f"{prefix}-next", "")).strip(),
            }
            if block["name"] or block["conditions"] or block["next"]:
                blocks.append(block)
        return blocks

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return not any(key.startswith(f"{name}-") for key in data)

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        blocks = [block for block in (value or []) if isinstance(block, dict)] or [{}]
        rendered = []
        for index, block in enumerate(blocks):
            prefix = f"{name}-{index}"
            rendered.append(
                {
                    "index": index,
                    "number": index + 1,
                    "prefix": prefix,
                    "name": block.get("name", ""),
                    "conditions": self.conditions.render(f"{prefix}-when", block.get("conditions") or []),
                    "target": self.target.render(f"{prefix}-next", block.get("next") or ""),
                }
            )
        context.update(
            blocks=rendered,
            block_label=self.block_label,
            name_placeholder=self.name_placeholder,
            when_label=self.when_label,
            target_label=self.target_label,
            add_label=self.add_label,
        )
        return context


class ConditionBlocksField(forms.Field):
    """Blocks as the CONTRACT reads them: [{"name", "conditions": [COND...], "next"}]."""

    def __init__(
        self,
        *,
        conditions: ConditionRowsField,
        block_label: str = "Branch",
        need_target: str = "Choose the step this branch leads to.",
        default_target: str = "",
        **kwargs: Any,
    ) -> None:
        self.conditions = conditions
        self.block_label = block_label
        self.need_target = need_target
        self.default_target = default_target  # what an unchosen target means (a goal: end the run)
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        blocks, problems = [], []
        for number, block in enumerate(value or [], start=1):
            where = f"{self.block_label} {number}" + (f" (“{block['name']}”)" if block.get("name") else "")
            try:
                conditions = self.conditions.to_python(block.get("conditions") or [])
            except ValidationError as exc:
                problems += [f"{where}: {message[:1].lower() + message[1:]}" for message in exc.messages]
                continue
            target = str(block.get("next") or "") or self.default_target
            if not conditions and self.block_label == "Goal":
                problems.append(f"{where}: add the conditions that say when it is met.")
            if not target:
                problems.append(f"{where}: {self.need_target[:1].lower() + self.need_target[1:]}")
            elif target != END and not STEP_KEY.fullmatch(target):
                problems.append(f"{where}: choose one of the workflow's steps.")
            blocks.append({"name": block.get("name") or "", "conditions": conditions, "next": target})
        if problems:
            raise ValidationError(problems)
        return blocks

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return (initial or []) != self.to_python(data)
        except ValidationError:
            return True


# --- split paths: rows of (name, weight, next) --------------------------------------------------------
class SplitPathsWidget(forms.Widget):
    """Rows of a split's paths, with the weights' total shown as you type (builder.js)."""

    template_name = "workflows/widgets/split_paths.html"

    def __init__(self, *, target: StepChoiceWidget, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.target = target

    def value_from_datadict(self, data: Any, files: Any, name: str) -> list[dict[str, Any]]:
        getlist: Callable[[str], list[Any]] = (
            data.getlist if hasattr(data, "getlist") else (lambda key: data.get(key, []))
        )
        names, weights, targets = getlist(f"{name}-name"), getlist(f"{name}-weight"), getlist(f"{name}-next")
        rows = []
        for index, path_name in enumerate(names):
            weight = weights[index] if index < len(weights) else ""
            target = targets[index] if index < len(targets) else ""
            if str(path_name).strip() or str(weight).strip() or str(target).strip():
                rows.append({"name": str(path_name).strip(), "weight": str(weight).strip(), "next": str(target)})
        return rows

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return f"{name}-name" not in data

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        rows = [row for row in (value or []) if isinstance(row, dict)]
        if not rows:
            rows = [{"name": "A", "weight": 50, "next": ""}, {"name": "B", "weight": 50, "next": ""}]
        context.update(
            rows=[
                {
                    "name": row.get("name", ""),
                    "weight": row.get("weight", ""),
                    "target": self.target.render(f"{name}-next", row.get("next") or ""),
                }
                for row in rows
            ]
        )
        return context


class SplitPathsField(forms.Field):
    def to_python(self, value: Any) -> list[dict[str, Any]]:
        paths, problems = [], []
        for number, row in enumerate(value or [], start=1):
            where = f"Path {number}" + (f" (“{row['name']}”)" if row.get("name") else "")
            raw = str(row.get("weight", "")).strip().rstrip("%").strip()
            try:
                weight: Any = int(raw)
            except ValueError:
                problems.append(f"{where}: the share is a whole number from 1 to 100.")
                weight = raw
            target = str(row.get("next") or "")
            if not target:
                problems.append(f"{where}: choose the step this path leads to.")
            paths.append({"name": row.get("name") or f"Path {number}", "weight": weight, "next": target})
        if problems:
            raise ValidationError(problems)
        return paths

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return (initial or []) != self.to_python(data)
        except ValidationError:
            return True
