"""What a step's templates can see, and the port through which they are rendered.

`Hi {{ contact.first_name }}`, `{{ contact.custom_fields.plan }}` (or
`{{ custom.plan }}`), `{{ trigger.order_id }}`, `{{ steps.3.json.id }}` (what
step 3 returned), `{{ event }}`, `{{ workflow.name }}`, `{{ run.id }}`.

The context is made only of read-only plain data (mappings, tuples, text,
numbers): a template can read values but can reach no object, method or
attribute beyond them, and cannot change anything.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

CONTACT_TEMPLATE_FIELDS = ("email", "phone", "first_name", "last_name")
CONTACT_VARIABLES = ("id", *CONTACT_TEMPLATE_FIELDS, "full_name", "tags", "custom_fields")
# What a template may name, by its first part: a tuple of the names allowed after it, or FREE when
# anything may follow (data that differs per run: trigger data, earlier steps' results, custom fields).
FREE: tuple[str, ...] = ()
TEMPLATE_VARIABLES: dict[str, tuple[str, ...] | None] = {
    "contact": CONTACT_VARIABLES,
    "custom": FREE,
    "trigger": FREE,
    "steps": FREE,
    "event": None,  # a text: nothing follows it
    "workflow": ("id", "name"),
    "run": ("id", "step"),
}


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


def known_variables() -> list[str]:
    """Every variable a template may name, as a marketer writes them (`contact.first_name`, `trigger.…`)."""
    names: list[str] = []
    for root, after in TEMPLATE_VARIABLES.items():
        if after is None:
            names.append(root)
        elif after == FREE:
            names.append(f"{root}.…")
        else:
            names.extend(f"{root}.{name}" for name in after)
    return names


def variable_problem(path: tuple[str, ...]) -> str | None:
    """Why a template may not name `path` (`("contact", "frist_name")`), or None.

    Checked when the workflow is saved: a misspelt variable renders as nothing at run time, so
    `Hi {{ contact.frist_name }}` would send "Hi " to every contact.
    """
    if not path:
        return None
    shown = ".".join(path)
    root, rest = path[0], path[1:]
    if root not in TEMPLATE_VARIABLES:
        close = difflib.get_close_matches(root, TEMPLATE_VARIABLES, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        return f"{{{{ {shown} }}}} names nothing a template can see.{hint} Known: {', '.join(known_variables())}"
    after = TEMPLATE_VARIABLES[root]
    if after is None:
        return f"{{{{ {shown} }}}}: {root} is a text, it has no parts" if rest else None
    if after == FREE or not rest:
        return None
    if rest[0] not in after:
        known = ", ".join(f"{root}.{name}" for name in after)
        close = difflib.get_close_matches(rest[0], after, n=1)
        hint = f" Did you mean {{{{ {root}.{close[0]} }}}}?" if close else ""
        return f"{{{{ {shown} }}}}: {root} has no {rest[0]!r}.{hint} Known: {known}"
    if root == "contact" and rest[0] not in ("tags", "custom_fields") and len(rest) > 1 and not rest[1].isdigit():
        return f"{{{{ {shown} }}}}: contact.{rest[0]} is a text, it has no parts"
    return None


def custom_field_warning(path: tuple[str, ...], in_use: frozenset[str]) -> str | None:
    """A custom field no contact of the account has yet: not an error (a contact may get it), but worth a look."""
    if len(path) >= 2 and path[0] == "custom":
        name = path[1]
    elif len(path) >= 3 and path[:2] == ("contact", "custom_fields"):
        name = path[2]
    else:
        return None
    if name in in_use:
        return None
    known = ", ".join(sorted(in_use)) or "none yet"
    return f"no contact has the custom field {name!r} yet, so it renders empty; custom fields in use: {known}"


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
