"""What the domain knows of a step type, asked of the registry by name: plain Python.

Each type's `workflows/steps/<name>/config.py` defines `CONFIG`, a `StepConfigType`: the keys its config takes,
how it is parsed and checked (`parse`), where it may send the run (`exits`), and the few facts the graph and
the responses need (it decides its own way on, a loop through it waits, which of its values are hidden in a
response). Validation, the graph and redaction read these instead of switching on a type's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from integrations.domain.sending.message import Channel
from workflows.domain.errors import FieldError
from workflows.domain.validation import Reader
from workflows.steps import registry

# (field path, step key or END) for each place a step's config may send the run; given the step's own path.
Exits = Callable[[Any, str], list[tuple[str, str]]]
# (field path, condition field) for each condition of the config that reads an earlier step's result.
StepReads = Callable[[Any, str], list[tuple[str, str]]]
# A stored config as a response may show it (credentials hidden).
Shown = Callable[[Mapping[str, Any]], dict[str, Any]]
# A config sent back by a client, with what was shown in place of hidden values made the stored ones again:
# (config, the stored config of the same type at the same position or None, its path) -> (config, problems).
Restore = Callable[[dict[str, Any], Mapping[str, Any] | None, str], tuple[dict[str, Any], list[FieldError]]]


def _no_exits(_config: Any, _here: str) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class StepConfigType:
    name: str
    keys: tuple[str, ...]  # the config keys it takes, besides the retry overrides every step may set
    parse: Callable[[Reader], Any]  # the typed config; problems go to reader.errors (then it is not used)
    exits: Exits = _no_exits  # where its config may send the run, besides its own `next`
    decides: bool = False  # it chooses its way on in its config: its own `next` is refused
    waits: bool = False  # a loop through it waits (a loop must pass one, or it would spin)
    step_reads: StepReads | None = None  # conditions that read `steps.<key>`: the graph checks the key exists
    shown: Shown | None = None  # None: shown as stored
    channel: Channel | None = None  # a send step: the channel of its message (the sending rules are asked per one)
    restore: Restore | None = None  # with `shown`: how a round trip keeps the hidden values


@cache
def config_type(name: str) -> StepConfigType:
    """The domain's part of the step type `name` (a KeyError for a name the registry does not list)."""
    return cast(StepConfigType, registry.load(name, "config").CONFIG)


def step_type_names() -> tuple[str, ...]:
    return registry.STEP_TYPES
