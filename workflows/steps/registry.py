"""The step types Relay offers, one line each, in the order the builder's palette and the API list them.

A name here is a folder, `workflows/steps/<name>/`, with the four modules every type has (`config`,
`executor`, `form`, `sentences`; docs/howto/add-a-step-type.md). This module imports none of them: each
layer loads only its own part (`load(name, "config")` from the domain, `"executor"` from the application,
`"form"` and `"sentences"` from the admin), so a layer never pulls in another's code through the registry.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache
from types import ModuleType

STEP_TYPES: tuple[str, ...] = (
    "send_email",
    "send_sms",
    "send_voice",
    "webhook",
    "wait",
    "update_contact",
    "add_tag",
    "remove_tag",
    "branch",
    "split",
    "wait_for_event",
    "end",
)

PARTS = ("config", "executor", "form", "sentences")  # every type has these
OPTIONAL_PARTS = ("schema",)  # its config's OpenAPI schema (the API ring), where the type documents one


@cache
def load(name: str, part: str) -> ModuleType:
    """The module `part` of the step type `name` (a KeyError for a name the registry does not list); read its
    attributes (`CONFIG`, `EXECUTOR` ...) at each use, so a test may stand one in for a while."""
    if name not in STEP_TYPES:
        raise KeyError(name)
    if part not in (*PARTS, *OPTIONAL_PARTS):
        raise ValueError(f"a step type's parts are {', '.join((*PARTS, *OPTIONAL_PARTS))}, not {part!r}")
    return importlib.import_module(f"{__package__}.{name}.{part}")


@cache
def load_optional(name: str, part: str) -> ModuleType | None:
    """An optional part of a step type, or None when its folder has none."""
    if name not in STEP_TYPES:
        raise KeyError(name)
    if importlib.util.find_spec(f"{__package__}.{name}.{part}") is None:
        return None
    return load(name, part)
