"""The builder's form of a tag step: one tag, picked from the account's or typed (`remove_tag` reuses it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, StepConfigForm
from workflows.admin_forms.widgets import TagInput


class TagForm(StepConfigForm):
    group = "Contact"
    keys = {"tag": "tag"}
    tag = forms.CharField(label="Tag", required=False)

    def setup(self) -> None:
        self.fields["tag"].widget = TagInput(attrs={"placeholder": "e.g. engaged"}, list_id=ACCOUNT_TAGS_LIST)
        self.fields["tag"].help_text = "Pick one of the account's tags or type a new one."

    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        split = cls._split_retries(config)
        if split is None or not isinstance(split[0].get("tag", ""), str):
            return None
        return {"tag": split[0].get("tag", "")}

    def to_config(self) -> dict[str, Any]:
        return {"tag": self.cleaned_data["tag"]}


class AddTagForm(TagForm):
    action_type = "add_tag"
    label = "Add a tag"
    description = "Tag the contact (other workflows may start on it)."


FORM = AddTagForm
