"""What an ExecutionLog row may hold: bounded, redacted response data.

Error details follow the queue's one rule (`kernel.failures.format_error`:
`Type: message`, one line, URLs cut to scheme and host, at most 1,000
characters). Response data is ours: a small JSON object (at most
8 KB), every text in it with URLs cut to scheme and host,
so a token in a link never lands in the log. It is what the run's history
shows. What later steps read (`steps.N`, `steps.<key>`) is the step's
output (`bounded_output`): the same unless the step says otherwise, as a
webhook does (its answer as it came, never shown).

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
STEP_OUTPUT_MAX_BYTES = 16 * 1024  # what later steps read of one step (the run's context)
_MAX_JSON_DEPTH = 32


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


def bounded_output(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """What later steps read of a step (`steps.<key>` in conditions, `{{ steps.N }}` in templates), kept in the
    run's context: the values as the step got them, never redacted or cut to scheme and host, since a
    condition must read what the receiver sent (docs/decisions/secrets-and-step-output.md). It is never shown:
    the log row's response data is the copy for that.

    Made storable as jsonb needs (NUL and surrogates become U+FFFD, NaN and infinities text) and bounded: texts
    are cut as `bounded_response` cuts them, and a parsed answer (`json`) is kept whole or, when the whole
    does not fit in STEP_OUTPUT_MAX_BYTES, left out with `json_omitted` saying why, never kept in part.
    """
    if not data:
        return {}
    rest = {key: value for key, value in data.items() if key != "json"}
    kept: dict[str, Any] = {}
    for text_limit in (MAX_TEXT, 500, 100):
        kept = {storable_text(str(k)[:100]): _storable(v, 0, text_limit) for k, v in list(rest.items())[:100]}
        if _size(kept) <= STEP_OUTPUT_MAX_BYTES // 2:
            break
    if "json" in data:
        answer = _storable(data["json"], 0, None)
        if _size(kept) + _size(answer) <= STEP_OUTPUT_MAX_BYTES:
            kept["json"] = answer
        else:
            kept["json_omitted"] = f"the parsed answer is larger than {STEP_OUTPUT_MAX_BYTES // 1024} KB"
    return kept


def _storable(value: Any, depth: int, text_limit: int | None) -> Any:
    """`value` as jsonb can hold it, texts cut to `text_limit` (None: whole)."""
    if depth > _MAX_JSON_DEPTH:
        return "…"
    if isinstance(value, str):
        text = storable_text(value)
        return text if text_limit is None else truncate(text, text_limit)
    if isinstance(value, Mapping):
        return {storable_text(str(k)): _storable(v, depth + 1, text_limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(v, depth + 1, text_limit) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, int | float | bool):
        return value
    return storable_text(str(value))
