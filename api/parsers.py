"""JSON bodies the rest of the code can trust to be storable.

What would pass Python's parsing and then fail deep in the database as a 500 is refused here
(`kernel/storable_json.py` says what and why): a number that is not finite is a validation error naming its
field (`NaN`, `Infinity`, and `1e400`, which Python reads as infinity); NUL characters, lone surrogates and
nesting deep enough to exhaust the stack make the body malformed.
"""

import codecs
import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from kernel.storable_json import MAX_DEPTH, find_unstorable


def _as_float(constant: str) -> float:
    """NaN, Infinity, -Infinity read as the floats they name, so the check below can name their field."""
    return float(constant)


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.load(codecs.getreader(encoding)(stream), parse_constant=_as_float)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        found = find_unstorable(data)
        if found is not None and found.is_number:
            from api.problems import InvalidInput  # here: problems imports DRF's views, which load us

            raise InvalidInput.field(found.path, found.reason)
        if found is not None:
            raise ParseError(f"JSON parse error - {found.path or 'the body'} {found.reason}")
        return data
