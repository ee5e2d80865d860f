"""Take a tag off the contact: the same config as `add_tag`'s."""

from __future__ import annotations

from workflows.domain.step_types import StepConfigType
from workflows.steps.add_tag.config import TagConfig, parse

__all__ = ["CONFIG", "TagConfig"]

CONFIG = StepConfigType(name="remove_tag", keys=("tag",), parse=parse)
