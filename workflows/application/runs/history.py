"""A run's history rows that record a decision rather than an attempt of a step: a wait that ended, a goal
met, an operator's retry that lifted the loop cap. One shape, so the timeline reads them all alike."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from workflows.domain.workflow import Step


def decision_row(
    execution_id: UUID,
    step: Step,
    *,
    outcome: str,
    at: datetime,
    response: dict[str, Any],
    decision: dict[str, Any],
) -> dict[str, Any]:
    """The ExecutionLog fields of a decision taken at `step` (attempt 1, no time spent, no error)."""
    return {
        "execution_id": execution_id,
        "step_index": step.index,
        "step_key": step.key,
        "step_name": step.label,
        "action_type": step.action_type,
        "attempt_number": 1,
        "outcome": outcome,
        "started_at": at,
        "duration_ms": 0,
        "error_category": "",
        "error_details": "",
        "response_data": response,
        "decision": decision,
    }
