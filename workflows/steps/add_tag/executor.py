"""Add the tag through the contacts service (its `tag.added` event fires, so other workflows chain); `remove_tag`
is the same with `add = False`."""

from __future__ import annotations

from typing import cast

from contacts.application.services import contact_add_tag, contact_remove_tag
from contacts.domain.model import ContactError, normalize_tag
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun
from workflows.steps.add_tag.config import TagConfig


class TagAction:
    action_type: str
    external = False
    add: bool

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(TagConfig, run.step.config)
        try:
            tag = normalize_tag(run.text(config.tag, "tag"))
            if self.add:
                _, changed = contact_add_tag(contact_id=run.contact_id, tag=tag)
            else:
                _, changed = contact_remove_tag(contact_id=run.contact_id, tag=tag)
        except ContactError as exc:
            raise ValidationFailure(f"tag: {exc.reason}") from None
        return ActionResult({"tag": tag, "added" if self.add else "removed": changed})


class AddTag(TagAction):
    action_type = "add_tag"
    add = True


EXECUTOR = AddTag()
