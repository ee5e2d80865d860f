"""Path converters for API URLs. Importing this module registers them."""

from django.urls import register_converter

MAX_ID_DIGITS = 18  # below 2**63: a longer id cannot exist, and would overflow a bigint column


class ApiIdConverter:
    """A positive integer id that fits a bigint; anything else is simply not found (404)."""

    regex = f"[0-9]{{1,{MAX_ID_DIGITS}}}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(ApiIdConverter, "api_id")

# drf-spectacular: how `<api_id:...>` appears in the schema.
ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 10**MAX_ID_DIGITS - 1}
