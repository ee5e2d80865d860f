"""Reading untrusted input (a step's config, a trigger) into typed values, collecting every error with its path.

A marketer who saves a workflow sees all of its problems at once, each named
by where it is (`steps[2].config.url`) and why, instead of one at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.domain.errors import FieldError
from workflows.domain.templates import variable_problem

# Checks one template's syntax; returns a reason when it does not compile, else None.
TemplateCheck = Callable[[str], str | None]
# The variables one template reads, as lookup paths: ("contact", "first_name").
TemplateVariables = Callable[[str], list[tuple[str, ...]]]
# Why the webhook guard would refuse to connect to this URL's host, or None (checked when saved).
TargetCheck = Callable[[str], str | None]


def _no_variables(_text: str) -> list[tuple[str, ...]]:
    return []


TEMPLATE_MARKERS = ("{{", "{%")


def is_template(text: str) -> bool:
    return any(marker in text for marker in TEMPLATE_MARKERS)


@dataclass(frozen=True)
class ValidationContext:
    """What validation needs from outside the domain, passed in so the rules stay plain Python."""

    check_template: TemplateCheck
    contact_fields: frozenset[str]  # contact fields a step may set (contacts owns the list)
    # What a save checks beyond the shapes, so what would fail at run time fails now instead. Reading a
    # published version checks none of them (it was checked when published; the world may have moved).
    template_variables: TemplateVariables = _no_variables
    check_webhook_target: TargetCheck | None = None
    known_events: frozenset[str] | None = None  # None: any event name is accepted
    # A contact.updated wait's `match.field` must be a field that event reports (checked since it was a bare
    # text: a version published before keeps loading, its wait just never met).
    check_watched_fields: bool = False


@dataclass
class Reader:
    """Reads one JSON object at `path`; every problem becomes a FieldError in `errors`."""

    raw: Any
    path: str
    context: ValidationContext
    errors: list[FieldError] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not isinstance(self.raw, Mapping):
            self.error(self.path, "must be an object")
            self.raw = {}

    # --- reporting -------------------------------------------------------------------
    def at(self, key: str | int) -> str:
        return f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}"

    def error(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def has(self, key: str) -> bool:
        return key in self.raw and self.raw[key] is not None

    def get(self, key: str) -> Any:
        self._seen.add(key)
        return self.raw.get(key)

    def refuse_unknown(self, allowed: Iterable[str]) -> None:
        """Typos fail at save time: an unknown setting is an error, not silently ignored."""
        allowed = set(allowed)
        for key in self.raw:
            if key not in allowed:
                hint = f"; expected one of: {', '.join(sorted(allowed))}" if allowed else ""
                self.error(self.at(str(key)), f"is not a known setting{hint}")

    # --- typed readers ------------------------------------------------------------------
    def string(
        self,
        key: str,
        *,
        required: bool = False,
        max_length: int = 1000,
        choices: Iterable[str] | None = None,
        default: str | None = None,
        pattern: re.Pattern[str] | None = None,
        pattern_reason: str = "has an invalid format",
    ) -> str | None:
        value = self.get(key)
        path = self.at(key)
        if value is None or value == "":
            if required:
                self.error(path, "is required")
            return default
        if not isinstance(value, str):
            self.error(path, "must be a string")
            return default
        if len(value) > max_length:
            self.error(path, f"must be at most {max_length} characters")
            return default
        if choices is not None:
            options = list(choices)
            if value not in options:
                self.error(path, f"must be one of: {', '.join(options)} (got {value!r})")
                return default
        if pattern is not None and not pattern.fullmatch(value):
            self.error(path, pattern_reason)
            return default
        return value

    def template(self, key: str, *, required: bool = False, max_length: int = 10_000) -> str | None:
        value = self.string(key, required=required, max_length=max_length)
        if value is not None:
            self.check_template_at(self.at(key), value)
        return value

    def check_template_at(self, path: str, text: str) -> bool:
        if not is_template(text):
            return True
        reason = self.context.check_template(text)
        if reason:
            self.error(path, f"template error: {reason}")
            return False
        problems = [p for p in map(variable_problem, self.context.template_variables(text)) if p]
        for problem in problems:
            self.error(path, problem)
        return not problems

    def number(
        self, key: str, *, minimum: float, maximum: float, required: bool = False, integer: bool = False
    ) -> float | int | None:
        value = self.get(key)
        path = self.at(key)
        if value is None:
            if required:
                self.error(path, "is required")
            return None
        kind = "a whole number" if integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
            self.error(path, f"must be {kind}")
            return None
        if value != value or not minimum <= value <= maximum:  # NaN fails too
            self.error(path, f"must be {kind} between {minimum:g} and {maximum:g}")
            return None
        return value

    def mapping(self, key: str, *, required: bool = False, max_items: int = 100) -> dict[str, Any] | None:
        value = self.get(key)
        path = self.at(key)
        if value is None:
            if required:
                self.error(path, "is required")
            return None
        if not isinstance(value, Mapping):
            self.error(path, "must be an object")
            return None
        if len(value) > max_items:
            self.error(path, f"must have at most {max_items} entries")
            return None
        return dict(value)

    def json_value(self, key: str, *, max_bytes: int) -> Any:
        value = self.get(key)
        if value is None:
            return None
        return value if self.check_json(self.at(key), value, max_bytes=max_bytes) else None

    def check_json(self, path: str, value: Any, *, max_bytes: int) -> bool:
        try:
            encoded = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            self.error(path, "must be plain JSON (objects, arrays, strings, numbers, booleans, null)")
            return False
        if len(encoded.encode()) > max_bytes:
            self.error(path, f"must be at most {max_bytes:,} bytes as JSON")
            return False
        return True

    def check_templates_in(self, path: str, value: Any) -> None:
        """Every string inside a JSON value is a template: check each, naming its own path."""
        if isinstance(value, str):
            self.check_template_at(path, value)
        elif isinstance(value, Mapping):
            for k, v in value.items():
                self.check_templates_in(f"{path}.{k}", v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.check_templates_in(f"{path}[{i}]", v)
