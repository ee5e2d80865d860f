"""The builder's form of a step that takes a tag off: `add_tag`'s form, worded for removing."""

from __future__ import annotations

from workflows.steps.add_tag.form import TagForm


class RemoveTagForm(TagForm):
    action_type = "remove_tag"
    label = "Remove a tag"
    description = "Take a tag off the contact."


FORM = RemoveTagForm
