"""End the run here: it completes at once ("ended by step"). No settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows.domain.actions import END
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader


@dataclass(frozen=True)
class EndConfig:
    pass


def parse(r: Reader) -> EndConfig:
    return EndConfig()


def exits(config: Any, here: str) -> list[tuple[str, str]]:
    return [(f"{here}.action_type", END)]


CONFIG = StepConfigType(name="end", keys=(), parse=parse, exits=exits, decides=True)
