"""Serializer conventions for request bodies."""

from collections.abc import Mapping
from typing import ClassVar

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not know, naming them.

    Silently dropping `unsubscibed: true` would tell a client its change was
    made. `unknown_field_hints` says where a known-elsewhere field belongs.
    """

    unknown_field_hints: ClassVar[Mapping[str, str]] = {}

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = [key for key in data if key not in writable]
            if unknown:
                raise serializers.ValidationError(
                    {key: [self.unknown_field_hints.get(key, "is not a field of this object")] for key in unknown}
                )
        return super().to_internal_value(data)
