"""If / else: the first branch whose conditions all hold is taken, else the default. Its conditions may read
earlier steps' results (`steps.<key>...`), so the graph checks each names a step of the workflow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows.domain.actions import item_name, item_target, items, target
from workflows.domain.conditions import RUN_ROOTS, Condition, parse_conditions
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader

MAX_BRANCHES = 20


@dataclass(frozen=True)
class Branch:
    name: str
    conditions: tuple[Condition, ...]
    next: str  # a step key, or END


@dataclass(frozen=True)
class BranchConfig:
    branches: tuple[Branch, ...]
    default: str  # a step key, or END


def parse(r: Reader) -> BranchConfig:
    branches = []
    names: set[str] = set()
    for index, (path, item) in enumerate(items(r, "branches", minimum=1, maximum=MAX_BRANCHES)):
        for extra in item:
            if extra not in ("name", "conditions", "next"):
                r.error(f"{path}.{extra}", "is not a known setting; expected name, conditions, next")
        name = item_name(r, item, path, index, names)
        conditions = parse_conditions(
            item.get("conditions"), f"{path}.conditions", r.errors, roots=RUN_ROOTS, allow_empty=False
        )
        branches.append(Branch(name=name, conditions=tuple(conditions), next=item_target(r, item, path)))
    return BranchConfig(branches=tuple(branches), default=target(r, "default"))


def exits(config: Any, here: str) -> list[tuple[str, str]]:
    assert isinstance(config, BranchConfig)
    found = [(f"{here}.config.branches[{i}].next", b.next) for i, b in enumerate(config.branches)]
    return [*found, (f"{here}.config.default", config.default)]


def step_reads(config: Any, here: str) -> list[tuple[str, str]]:
    assert isinstance(config, BranchConfig)
    return [
        (f"{here}.config.branches[{b}].conditions[{c}].field", condition.field)
        for b, branch in enumerate(config.branches)
        for c, condition in enumerate(branch.conditions)
    ]


CONFIG = StepConfigType(
    name="branch", keys=("branches", "default"), parse=parse, exits=exits, decides=True, step_reads=step_reads
)
