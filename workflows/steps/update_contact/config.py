"""Set the contact's fields (templates) and custom fields (JSON values whose texts are templates)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader

_CUSTOM_FIELD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True)
class UpdateContactConfig:
    fields: tuple[tuple[str, str], ...] = ()  # contact field -> template
    custom_fields: tuple[tuple[str, Any], ...] = ()  # key -> JSON value (strings are templates)


def parse(r: Reader) -> UpdateContactConfig:
    fields: list[tuple[str, str]] = []
    raw_fields = r.mapping("fields", max_items=20) or {}
    allowed = r.context.contact_fields
    for name, value in raw_fields.items():
        path = f"{r.at('fields')}.{name}"
        if name not in allowed:
            r.error(path, f"is not a contact field a step may set; expected one of: {', '.join(sorted(allowed))}")
        elif not isinstance(value, str):
            r.error(path, "must be a string")
        elif len(value) > 1000:
            r.error(path, "must be at most 1000 characters")
        elif r.check_template_at(path, value):
            fields.append((name, value))
    custom: list[tuple[str, Any]] = []
    raw_custom = r.mapping("custom_fields", max_items=100) or {}
    for key, value in raw_custom.items():
        path = f"{r.at('custom_fields')}.{key}"
        if not _CUSTOM_FIELD_KEY.fullmatch(str(key)):
            r.error(path, "a custom field name is a letter, then letters, digits or _ (at most 64)")
            continue
        before = len(r.errors)
        if r.check_json(path, value, max_bytes=16 * 1024):
            r.check_templates_in(path, value)
        if len(r.errors) == before:
            custom.append((str(key), value))
    if not raw_fields and not raw_custom and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs `fields` or `custom_fields` to set")
    return UpdateContactConfig(fields=tuple(fields), custom_fields=tuple(custom))


CONFIG = StepConfigType(name="update_contact", keys=("fields", "custom_fields"), parse=parse)
