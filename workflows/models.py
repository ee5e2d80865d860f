"""Django finds the models here; they live in workflows.infrastructure.models."""

from workflows.infrastructure.models import (
    ExecutionLog,
    ScheduledHook,
    ScheduledHookRun,
    TriggerSource,
    Workflow,
    WorkflowExecution,
    WorkflowStep,
    WorkflowVersion,
)

__all__ = [
    "ExecutionLog",
    "ScheduledHook",
    "ScheduledHookRun",
    "TriggerSource",
    "Workflow",
    "WorkflowExecution",
    "WorkflowStep",
    "WorkflowVersion",
]
