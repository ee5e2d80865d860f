"""What a step's templates can see, and the port through which they are rendered.

`Hi {{ contact.first_name }}`, `{{ contact.custom_fields.plan }}` (or
`{{ custom.plan }}`), `{{ trigger.order_id }}`, `{{ steps.3.json.id }}` (what
step 3 returned), `{{ event }}`, `{{ workflow.name }}`, `{{ run.id }}`.

The context is made only of read-only plain data (mappings, tuples, text,
numbers): a template can read values but can reach no object, method or
attribute beyond them, and cannot change anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

CONTACT_TEMPLATE_FIELDS = ("email", "phone", "first_name", "last_name")


class TemplateError(ValueError):
    """A template that cannot be rendered with this run's data."""


class TemplateRenderer(Protocol):
    def render_text(self, source: str, context: Mapping[str, Any]) -> str:
        """Plain text: nothing escaped."""
        ...

    def render_html(self, source: str, context: Mapping[str, Any]) -> str:
        """HTML: every value is escaped unless the template says otherwise."""
        ...

    def check(self, source: str) -> str | None:
        """Why `source` does not compile, or None."""
        ...


def contact_view(contact: Mapping[str, Any]) -> dict[str, Any]:
    """The contact as templates and filters see it (no consent flags, no internal fields)."""
    first, last = contact.get("first_name", ""), contact.get("last_name", "")
    return {
        "id": contact.get("id"),
        **{name: contact.get(name, "") for name in CONTACT_TEMPLATE_FIELDS},
        "full_name": f"{first} {last}".strip(),
        "tags": list(contact.get("tags") or []),
        "custom_fields": dict(contact.get("custom_fields") or {}),
    }


def template_context(
    *,
    contact: Mapping[str, Any],
    trigger: Mapping[str, Any],
    steps: list[Any],
    event: str,
    workflow: Mapping[str, Any],
    run: Mapping[str, Any],
) -> Mapping[str, Any]:
    view = contact_view(contact)
    return freeze(
        {
            "contact": view,
            "custom": view["custom_fields"],
            "trigger": dict(trigger),
            "steps": list(steps),
            "event": event,
            "workflow": dict(workflow),
            "run": dict(run),
        }
    )


def freeze(value: Any) -> Any:
    """A read-only copy made of mappings, tuples and scalars; anything else becomes its text."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def render_tree(value: Any, render: Callable[[str], str]) -> Any:
    """Render every string inside a JSON value (keys stay as written)."""
    if isinstance(value, str):
        return render(value)
    if isinstance(value, Mapping):
        return {k: render_tree(v, render) for k, v in value.items()}
    if isinstance(value, list):
        return [render_tree(v, render) for v in value]
    return value
