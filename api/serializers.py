"""Serializer conventions for request bodies."""

from collections.abc import Mapping
from typing import ClassVar

from rest_framework import serializers

# In the OpenAPI schema, marks a part of a request whose rules JSON Schema cannot state (a cron expression, the
# step graph, an opaque cursor); its value says the rule in words. A 400 about a part so marked is the only
# refusal of a schema-valid request the API may answer (tests/integration/api/test_schema_live.py holds it).
CHECKED = "x-relay-checked"

# White space as Python's str.strip() and str.isspace() have it, spelled out for patterns: ECMA's `\s` (which
# JSON Schema patterns use) leaves out \x1c-\x1f and \x85 and takes in \ufeff, so "\x1f" would pass `\S` there
# and still be blank here. NOT_BLANK: some character that is not white space (a text DRF trims must keep one).
WHITE_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NOT_BLANK = f"[^{WHITE_SPACE}]"


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not know, naming them.

    Silently dropping `unsubscibed: true` would tell a client its change was
    made. `unknown_field_hints` says where a known-elsewhere field belongs.
    """

    unknown_field_hints: ClassVar[Mapping[str, str]] = {}
    # For the schema (api.schema.ApiAutoSchema): fields the service requires although the serializer leaves
    # them to it (so that all problems come in one answer), and JSON Schema to merge into the request body's.
    schema_required: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def schema_extra(cls, *, patch: bool) -> Mapping[str, object]:
        """JSON Schema to merge into the request body's (`patch`: for PATCH, where every field is optional)."""
        return {}

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = [key for key in data if key not in writable]
            if unknown:
                raise serializers.ValidationError(
                    {key: [self.unknown_field_hints.get(key, "is not a field of this object")] for key in unknown}
                )
        return super().to_internal_value(data)
