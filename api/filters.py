"""Declared query filters: parsed, validated, and described in the schema from one declaration.

    class ContactListView(AccountView):
        filters = FilterSet(
            Text("email", "Exact email address, case-insensitive."),
            Choice("status", JobStatus, "Only jobs in this state."),
            Boolean("unsubscribed", "true or false."),
            Timestamp("created_after", "ISO 8601; only objects created at or after it."),
        )

    filters = self.parse_filters()   # {"email": "...", "status": "dead", ...}; absent ones are missing

An unknown value (`?status=bogus`) or an unknown parameter (`?stauts=dead`)
is a 400 naming what is allowed: a misspelt filter silently ignored would
return everything, and a client would act on the wrong list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from api.problems import InvalidInput
from api.serializers import NOT_BLANK

MAX_TEXT = 254


class FilterError(ValueError):
    pass


@dataclass(frozen=True)
class Filter:
    name: str
    description: str = ""

    def parse(self, raw: str) -> Any:
        raise NotImplementedError

    def parameter(self) -> OpenApiParameter:
        raise NotImplementedError


@dataclass(frozen=True)
class Text(Filter):
    max_length: int = MAX_TEXT
    schema: Mapping[str, Any] | None = None  # what the value must be, when the view checks more (a tag's rules)

    def parse(self, raw: str) -> str:
        if not raw.strip():
            raise FilterError("must not be blank")
        if len(raw) > self.max_length:
            raise FilterError(f"must be at most {self.max_length} characters")
        if "\x00" in raw:
            raise FilterError("must not contain NUL characters")
        return raw

    def parameter(self) -> OpenApiParameter:
        # Not blank (some character that is not white space), at most max_length; NUL is refused everywhere.
        schema = {"type": "string", "minLength": 1, "maxLength": self.max_length, "pattern": NOT_BLANK}
        return OpenApiParameter(
            self.name, dict(self.schema or schema), OpenApiParameter.QUERY, description=self.description
        )


@dataclass(frozen=True)
class Choice(Filter):
    choices: tuple[str, ...] = ()

    def __init__(self, name: str, choices: Iterable[str] | type[Enum], description: str = "") -> None:
        values = tuple(c.value for c in choices) if isinstance(choices, type) else tuple(choices)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "choices", values)

    def parse(self, raw: str) -> str:
        if raw not in self.choices:
            raise FilterError(f"{raw[:50]!r} is not one of: {', '.join(self.choices)}")
        return raw

    def parameter(self) -> OpenApiParameter:
        return OpenApiParameter(
            self.name, OpenApiTypes.STR, OpenApiParameter.QUERY, enum=list(self.choices), description=self.description
        )


_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


@dataclass(frozen=True)
class Boolean(Filter):
    def parse(self, raw: str) -> bool:
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise FilterError("must be one of: true, false")

    def parameter(self) -> OpenApiParameter:
        return OpenApiParameter(self.name, OpenApiTypes.BOOL, OpenApiParameter.QUERY, description=self.description)


@dataclass(frozen=True)
class Timestamp(Filter):
    """ISO 8601; a time without an offset is taken as UTC."""

    def parse(self, raw: str) -> datetime:
        try:
            parsed = parse_datetime(raw.strip())
        except ValueError:
            parsed = None
        if parsed is None:
            raise FilterError("must be an ISO 8601 date-time, e.g. 2026-01-31T12:00:00Z")
        if timezone.is_naive(parsed):
            return parsed.replace(tzinfo=UTC)
        try:
            # In UTC: databases refuse offsets Python accepts (PostgreSQL's end at 15:59).
            return parsed.astimezone(UTC)
        except (OverflowError, ValueError):
            raise FilterError("is out of range") from None

    def parameter(self) -> OpenApiParameter:
        return OpenApiParameter(self.name, OpenApiTypes.DATETIME, OpenApiParameter.QUERY, description=self.description)


@dataclass(frozen=True)
class Integer(Filter):
    minimum: int = 1
    maximum: int = 2**63 - 1

    def parse(self, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise FilterError("must be an integer") from None
        if not self.minimum <= value <= self.maximum:
            raise FilterError(f"must be between {self.minimum} and {self.maximum}")
        return value

    def parameter(self) -> OpenApiParameter:
        schema = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        return OpenApiParameter(self.name, schema, OpenApiParameter.QUERY, description=self.description)


@dataclass(frozen=True)
class FilterSet:
    """The filters a list accepts; `extra` names other parameters it also accepts (pagination)."""

    filters: tuple[Filter, ...] = field(default_factory=tuple)

    def __init__(self, *filters: Filter) -> None:
        object.__setattr__(self, "filters", tuple(filters))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.filters)

    def parse(self, query: Mapping[str, list[str]], *, also_allowed: Iterable[str] = ()) -> dict[str, Any]:
        """The filters given in `query` (a QueryDict's lists), parsed; InvalidInput naming every bad one."""
        allowed = {*self.names, *also_allowed}
        errors: list[dict[str, str]] = []
        parsed: dict[str, Any] = {}
        for name in query:
            if name not in allowed:
                errors.append(
                    {"field": name, "message": f"is not a known parameter; allowed: {', '.join(sorted(allowed))}"}
                )
        for f in self.filters:
            values = query.get(f.name)
            if not values:
                continue
            if len(values) > 1:
                errors.append({"field": f.name, "message": "must be given at most once"})
                continue
            try:
                parsed[f.name] = f.parse(values[0])
            except FilterError as exc:
                errors.append({"field": f.name, "message": str(exc)})
        if errors:
            raise InvalidInput(errors)
        return parsed

    def parameters(self) -> list[OpenApiParameter]:
        return [f.parameter() for f in self.filters]
