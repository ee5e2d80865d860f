"""The builder's form of a branch: condition blocks, each choosing the step it leads to, and where the others go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from workflows.admin_forms.condition_rows import condition_rows_field, conditions_ok
from workflows.admin_forms.conditions import condition_fields, operator_choices
from workflows.admin_forms.paths import (
    ConditionBlocksField,
    ConditionBlocksWidget,
    StepChoiceField,
    StepChoiceWidget,
)
from workflows.admin_forms.steps import StepConfigForm
from workflows.admin_forms.widgets import ConditionRowsWidget


class BranchForm(StepConfigForm):
    action_type = "branch"
    label = "Branch (if / else)"
    group = "Decide"
    description = "Send the contact one way or another: the first branch whose conditions all hold is taken."
    keys = {"branches": "branches", "default": "default"}
    decides = True

    branches = ConditionBlocksField(label="Branches", conditions=condition_rows_field())
    default = StepChoiceField(label="Otherwise, go to")
    field_order = ["branches", "default"]

    def setup(self) -> None:
        steps = self.builder.steps
        self.fields["branches"].widget = ConditionBlocksWidget(
            conditions=ConditionRowsWidget(
                field_choices=condition_fields(self.builder),
                operators=operator_choices(),
                earlier_steps="Steps' results",
            ),
            target=StepChoiceWidget(steps=steps),
        )
        cast(StepChoiceField, self.fields["default"]).set_steps(steps)
        self.fields["default"].help_text = "Where contacts go when no branch's conditions hold."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        if set(config) - {"branches", "default"}:
            return None
        branches = config.get("branches") or []
        if not isinstance(branches, list):
            return None
        for branch in branches:
            if not isinstance(branch, Mapping) or set(branch) - {"name", "conditions", "next"}:
                return None
            if not conditions_ok(branch.get("conditions") or []):
                return None
        return {"branches": [dict(b) for b in branches], "default": config.get("default") or ""}

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        if "branches" in data and not data["branches"]:
            self.add_error("branches", "Add at least one branch: its conditions, and the step it leads to.")
        if "default" in data and not data["default"]:
            self.add_error("default", "Choose where contacts go when no branch's conditions hold.")
        return data

    def to_config(self) -> dict[str, Any]:
        return {"branches": self.cleaned_data["branches"], "default": self.cleaned_data["default"]}


FORM = BranchForm
