"""A/B test: weighted paths (1-100, summing to 100); a run's path is picked by a hash of its id."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from workflows.domain.actions import item_name, item_target, items
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader

MAX_SPLIT_PATHS = 10


@dataclass(frozen=True)
class SplitPath:
    name: str
    weight: int  # 1-100; a split's weights sum to 100
    next: str


@dataclass(frozen=True)
class SplitConfig:
    paths: tuple[SplitPath, ...]

    def path_for(self, bucket: int) -> SplitPath:
        """The path a bucket (0-99) falls in: the first `weight` buckets go to the first path, and so on."""
        upto = 0
        for path in self.paths:
            upto += path.weight
            if bucket < upto:
                return path
        return self.paths[-1]


def split_bucket(run_id: UUID, step_key: str) -> int:
    """A run's bucket (0-99) at a split: a hash of the run id (and the split's key, so two splits of one
    run are independent). The same run always gets the same bucket: a retry or a crash keeps its path."""
    digest = hashlib.sha256(f"{run_id}:{step_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def parse(r: Reader) -> SplitConfig:
    paths = []
    names: set[str] = set()
    found = items(r, "paths", minimum=2, maximum=MAX_SPLIT_PATHS)
    for index, (path, item) in enumerate(found):
        for extra in item:
            if extra not in ("name", "weight", "next"):
                r.error(f"{path}.{extra}", "is not a known setting; expected name, weight, next")
        name = item_name(r, item, path, index, names)
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            r.error(f"{path}.weight", "must be a whole number from 1 to 100")
            weight = 0
        paths.append(SplitPath(name=name, weight=weight, next=item_target(r, item, path)))
    total = sum(p.weight for p in paths)
    if paths and len(paths) == len(found) and all(p.weight for p in paths) and total != 100:
        r.error(r.at("paths"), f"the weights must sum to 100 (they sum to {total})")
    return SplitConfig(paths=tuple(paths))


def exits(config: Any, here: str) -> list[tuple[str, str]]:
    assert isinstance(config, SplitConfig)
    return [(f"{here}.config.paths[{i}].next", p.next) for i, p in enumerate(config.paths)]


CONFIG = StepConfigType(name="split", keys=("paths",), parse=parse, exits=exits, decides=True)
