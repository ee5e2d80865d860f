"""An update of the contact in words: each field and custom field it sets."""

from __future__ import annotations

import json
from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(f"Set {k}", str(v)) for k, v in (c.get("fields") or {}).items()]
    found += [
        (f"Set custom field {k}", json.dumps(v, ensure_ascii=False)) for k, v in (c.get("custom_fields") or {}).items()
    ]
    return found


SENTENCES = StepSentences(lines=lines)
