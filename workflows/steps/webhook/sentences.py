"""A webhook step in words: the request, its headers and body (as a response shows them: credentials hidden)."""

from __future__ import annotations

import json
from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    found = [("Request", f"{c.get('method', 'POST')} {c.get('url', '')}")]
    for name, value in (c.get("headers") or {}).items():
        found.append((f"Header {name}", str(value)))
    if c.get("body") is not None:
        found.append(("Body", json.dumps(c["body"], ensure_ascii=False)))
    return found


SENTENCES = StepSentences(lines=lines)
