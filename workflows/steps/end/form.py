"""The builder's form of an end step: no settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.steps import StepConfigForm


class EndForm(StepConfigForm):
    action_type = "end"
    label = "End the run"
    group = "Decide"
    description = "Stop here: the contact's run completes (“ended by step”)."
    keys = {}
    decides = True

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        return {} if not config else None

    def to_config(self) -> dict[str, Any]:
        return {}


FORM = EndForm
