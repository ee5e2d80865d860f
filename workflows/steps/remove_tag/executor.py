"""Take the tag off through the contacts service (its `tag.removed` event fires): `add_tag`'s executor, removing."""

from __future__ import annotations

from workflows.steps.add_tag.executor import TagAction


class RemoveTag(TagAction):
    action_type = "remove_tag"
    add = False


EXECUTOR = RemoveTag()
