"""JSON a client sent that the database can store: one check for the API's parser and the admin's JSON fields.

Python's JSON reader takes what PostgreSQL's jsonb refuses, and the refusal then comes from deep in the
database as a 500 whose error quotes the row: numbers that are not finite (`NaN`, `Infinity`, and a literal
beyond the float range such as `1e400`, read as infinity), NUL characters, unpaired surrogates (not UTF-8).
Nesting deep enough to exhaust the stack is refused too. Each is found with the path of the value, so the
answer names the field (`custom_fields.n`). A key in a path is written with its control characters and
surrogates escaped (`custom_fields.\\ud800`): the path goes into an error message, which must be printable
and encodable even when the key itself is what cannot be stored.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 32
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
NOT_FINITE = "must be a finite number (NaN, Infinity and numbers beyond ±1.8e308 cannot be stored)"


@dataclass(frozen=True)
class Unstorable:
    path: str  # "" for the whole document, else like the API's error paths: `steps[2].config.url`
    reason: str

    @property
    def is_number(self) -> bool:
        return self.reason == NOT_FINITE


def find_unstorable(value: Any, path: str = "", depth: int = 0) -> Unstorable | None:
    """The first value in `value` the database cannot store, and why; None when all can be."""
    if depth > MAX_DEPTH:
        return Unstorable(path, f"is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, float):
        return None if math.isfinite(value) else Unstorable(path, NOT_FINITE)
    if isinstance(value, str):
        return _text_problem(value, path)
    if isinstance(value, dict):
        for key, item in value.items():
            name = escaped(key) if isinstance(key, str) else str(key)
            sub = f"{path}.{name}" if path else name
            found = (_text_problem(key, sub) if isinstance(key, str) else None) or find_unstorable(item, sub, depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_unstorable(item, f"{path}[{index}]", depth + 1)
            if found:
                return found
    return None


def escaped(text: str) -> str:
    """`text` with control characters and surrogates written as JSON escapes (`\\u0000`, `\\ud800`)."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _text_problem(text: str, path: str) -> Unstorable | None:
    if "\x00" in text:
        return Unstorable(path, "contains a NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return Unstorable(path, "contains an unpaired surrogate")
    return None
