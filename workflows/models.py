"""Django finds the models here; they live in workflows.infrastructure.models."""

from workflows.infrastructure.models import (
    ExecutionLog,
    TriggerSource,
    Workflow,
    WorkflowExecution,
    WorkflowStep,
    WorkflowVersion,
)

__all__ = ["ExecutionLog", "TriggerSource", "Workflow", "WorkflowExecution", "WorkflowStep", "WorkflowVersion"]
