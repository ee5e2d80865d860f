"""JSON bodies the rest of the code can trust to be storable.

DRF's JSONParser already refuses NaN and Infinity. This one also refuses
what would pass parsing and then fail deep in the database as a 500: NUL
characters (PostgreSQL text and jsonb cannot hold them), lone surrogates
(not encodable as UTF-8) and nesting deep enough to exhaust the stack.
"""

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


def _unstorable(value: Any, depth: int = 0) -> str | None:
    """Why `value` cannot be stored, or None."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "contains an unpaired surrogate"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            reason = _unstorable(key, depth + 1) or _unstorable(item, depth + 1)
            if reason:
                return reason
    elif isinstance(value, list):
        for item in value:
            reason = _unstorable(item, depth + 1)
            if reason:
                return reason
    return None


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from None
        reason = _unstorable(data)
        if reason:
            raise ParseError(f"JSON parse error - the body {reason}")
        return data
