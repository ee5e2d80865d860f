"""The builder's form of a split: paths with their shares (totalled as you type) and the step each leads to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from workflows.admin_forms.paths import SplitPathsField, SplitPathsWidget, StepChoiceWidget
from workflows.admin_forms.steps import StepConfigForm


class SplitForm(StepConfigForm):
    action_type = "split"
    label = "Split (A/B test)"
    group = "Decide"
    description = "Send each contact down one path at random, by the shares you set (the same contact, the same path)."
    keys = {"paths": "paths"}
    decides = True

    paths = SplitPathsField(label="Paths", required=False)

    def setup(self) -> None:
        self.fields["paths"].widget = SplitPathsWidget(target=StepChoiceWidget(steps=self.builder.steps))
        self.fields["paths"].help_text = "The shares must add up to 100%."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        if set(config) - {"paths"}:
            return None
        paths = config.get("paths") or []
        if not isinstance(paths, list) or not all(
            isinstance(p, Mapping) and not set(p) - {"name", "weight", "next"} for p in paths
        ):
            return None
        return {"paths": [dict(p) for p in paths]}

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        paths = data.get("paths")
        if paths is None:
            return data
        if len(paths) < 2:
            self.add_error("paths", "A split needs at least two paths.")
        weights = [p["weight"] for p in paths if isinstance(p["weight"], int)]
        if len(weights) == len(paths) and paths:
            if any(w < 1 or w > 100 for w in weights):
                self.add_error("paths", "Each share is a whole number from 1 to 100.")
            elif sum(weights) != 100:
                self.add_error("paths", f"The shares add up to {sum(weights)}%: they must add up to 100%.")
        return data

    def to_config(self) -> dict[str, Any]:
        return {"paths": self.cleaned_data["paths"]}


FORM = SplitForm
