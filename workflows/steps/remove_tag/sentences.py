"""A step that takes a tag off, in words: `add_tag`'s lines (its tag)."""

from __future__ import annotations

from workflows.steps.add_tag.sentences import SENTENCES

__all__ = ["SENTENCES"]
