"""Tag the contact: one tag, normalized as contacts take it, or a template normalized when the step runs.
`remove_tag` reads the same config (workflows/steps/remove_tag/config.py)."""

from __future__ import annotations

from dataclasses import dataclass

from contacts.domain.model import ContactError, normalize_tag
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader, is_template


@dataclass(frozen=True)
class TagConfig:
    tag: str  # normalized, or a template normalized when the step runs


def parse(r: Reader) -> TagConfig:
    tag = r.string("tag", required=True, max_length=500)
    if tag is None:
        return TagConfig(tag="")
    if is_template(tag):
        r.check_template_at(r.at("tag"), tag)
        return TagConfig(tag=tag)
    try:
        return TagConfig(tag=normalize_tag(tag))
    except ContactError as exc:
        r.error(r.at("tag"), exc.reason)
        return TagConfig(tag="")


CONFIG = StepConfigType(name="add_tag", keys=("tag",), parse=parse)
