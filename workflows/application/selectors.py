"""Reads for the admin and the API: workflows, versions, runs and their logs. Scoped by account when given."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery

from integrations.application.messages import deferred_messages
from workflows.application.errors import ExecutionNotFound, WorkflowNotFound
from workflows.domain.deferral import deferral_sentence
from workflows.domain.step_types import config_type, step_type_names
from workflows.infrastructure.models import ExecutionLog, Workflow, WorkflowExecution, WorkflowStep, WorkflowVersion


def workflow_list(
    *,
    account_id: int | None = None,
    status: str | None = None,
    trigger_type: str | None = None,
    trigger_event: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    with_step_count: bool = False,
) -> QuerySet[Workflow]:
    """By name. Filters are exact; `with_step_count` annotates `step_count` (the draft's steps) for lists."""
    query = Workflow.objects.select_related("current_version").order_by("name", "id")
    if account_id is not None:
        query = query.filter(account_id=account_id)
    if status:
        query = query.filter(status=status)
    if trigger_type:
        query = query.filter(trigger_type=trigger_type)
    if trigger_event:
        query = query.filter(trigger_event=trigger_event)
    if created_after is not None:
        query = query.filter(created_at__gte=created_after)
    if created_before is not None:
        query = query.filter(created_at__lt=created_before)
    if with_step_count:
        query = query.annotate(step_count=Count("steps"))
    return query


def workflow_get(*, workflow_id: int, account_id: int | None = None) -> Workflow:
    """The workflow with its draft steps (in order) and current version."""
    query = workflow_list(account_id=account_id).prefetch_related(
        Prefetch("steps", queryset=WorkflowStep.objects.order_by("position", "id"))
    )
    try:
        return query.get(pk=workflow_id)
    except (Workflow.DoesNotExist, ValueError, TypeError):
        raise WorkflowNotFound(workflow_id) from None


def workflow_versions(*, workflow_id: int, account_id: int | None = None) -> QuerySet[WorkflowVersion]:
    """Every published version, newest first."""
    query = WorkflowVersion.objects.filter(workflow_id=workflow_id).order_by("-number")
    if account_id is not None:
        query = query.filter(workflow__account_id=account_id)
    return query


def has_unpublished_changes(workflow: Workflow) -> bool:
    """True when the draft differs from what runs (or nothing was ever published)."""
    version = workflow.current_version
    if version is None:
        return True
    steps = [s.as_dict() for s in WorkflowStep.objects.filter(workflow=workflow).order_by("position", "id")]
    return (
        steps != version.steps
        or workflow.trigger_dict() != version.trigger_dict()
        or workflow.reenrollment != version.reenrollment
        or (workflow.goals or []) != (version.goals or [])
    )


def execution_list(
    *,
    account_id: int | None = None,
    workflow_id: int | None = None,
    contact_id: int | None = None,
    status: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> QuerySet[WorkflowExecution]:
    """Newest first. Filters are exact; unknown statuses are the caller's to refuse."""
    query = WorkflowExecution.objects.select_related("workflow", "version").order_by("-created_at", "-id")
    if account_id is not None:
        query = query.filter(account_id=account_id)
    if workflow_id is not None:
        query = query.filter(workflow_id=workflow_id)
    if contact_id is not None:
        query = query.filter(contact_id=contact_id)
    if status:
        query = query.filter(status=status)
    if created_after is not None:
        query = query.filter(created_at__gte=created_after)
    if created_before is not None:
        query = query.filter(created_at__lt=created_before)
    return query


def execution_get(
    *, execution_id: UUID | str, account_id: int | None = None, with_logs: bool = True
) -> WorkflowExecution:
    """One run; with its logs (in order) prefetched as `execution.logs.all()` unless `with_logs` is False."""
    try:
        pk = execution_id if isinstance(execution_id, UUID) else UUID(str(execution_id))
    except ValueError:
        raise ExecutionNotFound(execution_id) from None
    query = execution_list(account_id=account_id)
    if with_logs:
        query = query.prefetch_related(Prefetch("logs", queryset=ExecutionLog.objects.order_by("id")))
    try:
        return query.get(pk=pk)
    except WorkflowExecution.DoesNotExist:
        raise ExecutionNotFound(execution_id) from None


def execution_logs(*, execution_id: UUID | str, account_id: int | None = None) -> QuerySet[ExecutionLog]:
    execution = execution_get(execution_id=execution_id, account_id=account_id, with_logs=False)
    return ExecutionLog.objects.filter(execution=execution).order_by("id")


def execution_latest_logs(*, execution: WorkflowExecution, limit: int) -> tuple[list[ExecutionLog], int]:
    """The run's last `limit` log rows (oldest first) and how many it has: one run may log thousands of attempts."""
    logs = ExecutionLog.objects.filter(execution=execution)
    latest = list(logs.order_by("-id")[:limit])
    total = len(latest) if len(latest) < limit else logs.count()
    return latest[::-1], total


@dataclass
class TimelineStep:
    index: int
    name: str
    action_type: str
    # "done", "failed", "skipped", "current", "waiting", "retrying", "deferred", "to come", "not reached"
    state: str
    attempts: list[ExecutionLog]
    label: str = ""  # what the page calls the step (its name, or its action in words)
    summary: str = ""  # one line saying what it does
    key: str = ""  # the step's key in its version (CONTRACT: how the graph and the log name it)
    decisions: list[dict] = field(default_factory=list)  # what it chose, each time it ran (ExecutionLog.decision)
    # why it waits, in plain words, while it is deferred ("waiting for the send window (opens Tue 09:00 ...)")
    deferred: str = ""


def run_timeline(*, execution: WorkflowExecution) -> list[TimelineStep]:
    """Each step of the run's version with every attempt it made, and where the run is now."""
    logs: dict[int, list[ExecutionLog]] = {}
    for log in ExecutionLog.objects.filter(execution=execution).order_by("id"):
        logs.setdefault(log.step_index, []).append(log)
    ended = execution.status in ("completed", "failed", "cancelled")
    steps = []
    for index, step in enumerate(execution.version.steps):
        attempts = logs.get(index, [])
        last = attempts[-1].outcome if attempts else None
        if last == "succeeded":
            state = "done"
        elif last == "skipped":
            state = "skipped"
        elif last == "failed":
            state = "failed"
        elif index == execution.current_step_index and not ended:
            state = {"waiting": "waiting", "paused": "paused"}.get(execution.status, "current")
            if last == "retrying":
                state = "retrying"
            elif last == "deferred" and execution.status == "queued":
                state = "deferred"  # a send window, a frequency cap: asked again at the time its reason says
        elif ended:
            state = "not reached"
        else:
            state = "to come"
        steps.append(
            TimelineStep(
                index=index,
                name=step.get("name") or "",
                action_type=step.get("action_type", ""),
                state=state,
                attempts=attempts,
                key=step.get("key") or f"step_{index + 1}",
                decisions=[dict(log.decision) for log in attempts if log.decision],
                deferred=deferral_sentence(attempts[-1].response_data) if state == "deferred" else "",
            )
        )
    return steps


@dataclass(frozen=True)
class DeferredSend:
    """A message held back for a contact right now, in plain words: "email “Welcome” waiting for the send window
    (opens Tue 02 Jun 09:00 Europe/Paris)", from the run (and step) or the job it belongs to."""

    channel: str  # "email", "SMS", "voice call"
    what: str  # the step's name, else an email's subject, an SMS's first words ("" for a job's message)
    reason: str  # the rule's own words
    until: datetime | None
    run_id: UUID | None = None
    workflow: str = ""

    @property
    def sentence(self) -> str:
        named = f" “{self.what}”" if self.what else ""
        return f"{self.channel}{named} {self.reason}"


_CHANNEL_WORDS = {"email": "email", "sms": "SMS", "voice": "voice call"}


def _step_channel(action_type: Any) -> str:
    """The channel a send step's message goes by (its step type's config says), "" for any other step."""
    if not isinstance(action_type, str) or action_type not in step_type_names():
        return ""
    channel = config_type(action_type).channel
    return channel.value if channel is not None else ""


def deferred_sends(*, account_id: int, contact_id: int, limit: int = 20) -> list[DeferredSend]:
    """The contact's sends waiting for a send window or under a cap: its queued runs whose last log row is a
    deferral of the step they are at, and the ledger's deferred messages of no run (a send_email job)."""
    last = ExecutionLog.objects.filter(execution=OuterRef("pk")).order_by("-id")
    runs = (
        WorkflowExecution.objects.filter(account_id=account_id, contact_id=contact_id, status="queued")
        .annotate(
            last_outcome=Subquery(last.values("outcome")[:1]),
            last_index=Subquery(last.values("step_index")[:1]),
            last_data=Subquery(last.values("response_data")[:1]),
        )
        .filter(last_outcome="deferred")
        .select_related("workflow", "version")
        .order_by("resume_at")[:limit]
    )
    found: list[DeferredSend] = []
    for run in runs:
        if run.last_index != run.current_step_index:
            continue
        steps = run.version.steps
        step = steps[run.current_step_index] if run.current_step_index < len(steps) else {}
        data = run.last_data
        if isinstance(data, str):  # a JSON value read through a subquery: text on some backends
            data = json.loads(data)
        found.append(
            DeferredSend(
                channel=_CHANNEL_WORDS.get(_step_channel(step.get("action_type")), "message"),
                what=_step_words(step),
                reason=deferral_sentence(data),
                until=run.resume_at,
                run_id=run.pk,
                workflow=run.workflow.name,
            )
        )
    for message in deferred_messages(account_id=account_id, contact_id=contact_id, limit=limit):
        if message.run_id is not None:
            continue  # a run's: said above, with its step
        found.append(
            DeferredSend(
                channel=_CHANNEL_WORDS.get(message.channel, message.channel),
                what="",
                reason=message.reason,
                until=message.until,
            )
        )
    return found


def _step_words(step: dict) -> str:
    """What a marketer calls a send step: its name, else an email's subject or an SMS's first words."""
    if step.get("name"):
        return str(step["name"])
    config = step.get("config")
    if not isinstance(config, dict):
        config = {}
    text = str(config.get("subject") or config.get("body") or config.get("message") or "")
    return text if len(text) <= 40 else f"{text[:39]}…"
