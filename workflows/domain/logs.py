"""What an ExecutionLog row may hold: bounded, redacted response data.

Error details follow the queue's one rule (`kernel.failures.format_error`:
`Type: message`, one line, URLs cut to scheme and host, at most 1,000
characters). Response data is ours: a small JSON object (at most
8 KB), every text in it with URLs cut to scheme and host,
so a token in a link never lands in the log. It is also what later steps see
as `steps.N`, so it stays small.

Every text (keys too) is also made storable: NUL and lone UTF-16 surrogates
become U+FFFD. A receiver may answer `{"id": "\\u0000"}` or `"\\ud800"`;
Python parses both, but PostgreSQL's jsonb refuses them, and a row the
database refuses would fail the transaction that records the step. Numbers
jsonb cannot hold (NaN, Infinity, and 1e400, which Python reads as infinity)
are kept spelled out as text: "nan", "inf", "-inf".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from kernel.failures import redact_urls, storable_text, truncate

RESPONSE_DATA_MAX_BYTES = 8192
MAX_TEXT = 4096  # a webhook answer's body is kept up to WEBHOOK_RESPONSE_BODY_CHARS (4,096)


def bounded_response(data: Mapping[str, Any] | None, max_bytes: int = RESPONSE_DATA_MAX_BYTES) -> dict[str, Any]:
    if not data:
        return {}
    # Cut long texts shorter and shorter until the whole fits; then keep only the small facts.
    for text_limit in (MAX_TEXT, 500, 100):
        cleaned = _clean(dict(data), depth=0, text_limit=text_limit)
        if _size(cleaned) <= max_bytes:
            return cleaned
    small = {k: v for k, v in cleaned.items() if isinstance(v, int | float | bool | str) or v is None}
    small["truncated"] = True
    return small if _size(small) <= max_bytes else {"truncated": True}


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def _clean(value: Any, depth: int, text_limit: int) -> Any:
    if depth > 6:
        return "…"
    if isinstance(value, str):
        return truncate(redact_urls(storable_text(value)), text_limit)
    if isinstance(value, Mapping):
        return {storable_text(str(k)[:100]): _clean(v, depth + 1, text_limit) for k, v in list(value.items())[:100]}
    if isinstance(value, list | tuple):
        return [_clean(v, depth + 1, text_limit) for v in list(value)[:100]]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    return truncate(redact_urls(storable_text(str(value))), text_limit)
