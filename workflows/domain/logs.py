"""What an ExecutionLog row may hold: bounded, redacted response data.

Error details follow the queue's one rule (`jobs.domain.errors.format_error`:
`Type: message`, one line, URLs cut to scheme and host, at most 1,000
characters). Response data is ours: a small JSON object (at most
RESPONSE_DATA_MAX_BYTES), every text in it with URLs cut to scheme and host,
so a token in a link never lands in the log. It is also what later steps see
as `steps.N`, so it stays small.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobs.domain.errors import redact_urls, truncate

RESPONSE_DATA_MAX_BYTES = 4096
MAX_TEXT = 2000


def bounded_response(data: Mapping[str, Any] | None, max_bytes: int = RESPONSE_DATA_MAX_BYTES) -> dict[str, Any]:
    if not data:
        return {}
    cleaned = _clean(dict(data), depth=0)
    encoded = json.dumps(cleaned, separators=(",", ":"), default=str)
    if len(encoded.encode()) <= max_bytes:
        return cleaned
    # Too big: keep the small scalar facts (status codes, ids) and say what was cut.
    small = {k: v for k, v in cleaned.items() if isinstance(v, int | float | bool) or v is None}
    small.update({k: v for k, v in cleaned.items() if isinstance(v, str) and len(v) <= 200})
    small["truncated"] = True
    encoded = json.dumps(small, separators=(",", ":"), default=str)
    if len(encoded.encode()) > max_bytes:
        return {"truncated": True}
    return small


def _clean(value: Any, depth: int) -> Any:
    if depth > 6:
        return "…"
    if isinstance(value, str):
        return truncate(redact_urls(value), MAX_TEXT)
    if isinstance(value, Mapping):
        return {str(k)[:100]: _clean(v, depth + 1) for k, v in list(value.items())[:100]}
    if isinstance(value, list | tuple):
        return [_clean(v, depth + 1) for v in list(value)[:100]]
    if value is None or isinstance(value, int | float | bool):
        return value
    return truncate(redact_urls(str(value)), MAX_TEXT)
