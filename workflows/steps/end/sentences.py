"""An end step in words; and its decision in a run's timeline."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.admin_forms.summary import StepSentences


def lines(c: dict[str, Any]) -> list[tuple[str, str]]:
    return [("Ends", "the run completes here")]


def ended(decision: Mapping[str, Any]) -> str:
    return "Ended the run here (ended by step)"


SENTENCES = StepSentences(lines=lines, decisions={"end": ended})
