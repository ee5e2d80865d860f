"""Reads for the admin's numbers: per workflow, per step, and the operators' dashboard. Scoped by account.

Every figure comes from the database at page load (no cache, no background job): runs and their log rows
for the workflows side, the queue's table for the jobs side (through `jobs.application.operations`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, Min, OuterRef, Q
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from accounts.application.selectors import accounts_with_limits
from jobs.public.operations import failure_rate, queue_overview
from workflows.application.metrics import running_executions_by_account
from workflows.domain.execution import UNFINISHED, ExecutionStatus, StepOutcome
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution
from workflows.steps import registry

IN_FLIGHT = sorted(UNFINISHED)  # the domain's sets, so the dashboard counts as the limit and the rules do
RUN_STATUSES = [status.value for status in ExecutionStatus]


@dataclass(frozen=True)
class RunCounts:
    started: int = 0
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    # met a goal: ended by it (the reason "goal met: <name>") or moved on by it (a log row's goal decision)
    met_goal: int = 0


GOAL_MET = "goal met"


def _run_counts(query) -> RunCounts:
    counts = query.aggregate(
        started=Count("id"),
        met_goal=Count(
            "id",
            filter=Q(status=ExecutionStatus.COMPLETED, end_reason__startswith=GOAL_MET)
            | Q(Exists(ExecutionLog.objects.filter(execution=OuterRef("pk"), decision__kind="goal"))),
        ),
        in_flight=Count("id", filter=Q(status__in=IN_FLIGHT)),
        completed=Count("id", filter=Q(status=ExecutionStatus.COMPLETED)),
        failed=Count("id", filter=Q(status=ExecutionStatus.FAILED)),
        cancelled=Count("id", filter=Q(status=ExecutionStatus.CANCELLED)),
    )
    return RunCounts(**counts)


def workflow_run_counts(*, workflow_id: int, since: datetime) -> RunCounts:
    """Runs of the workflow started since `since`, by what became of them."""
    return _run_counts(WorkflowExecution.objects.filter(workflow_id=workflow_id, created_at__gte=since).order_by())


@dataclass(frozen=True)
class StepCounts:
    index: int
    name: str
    action_type: str
    key: str = ""
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    retried: int = 0
    deferred: int = 0  # asked again later (a send window, a frequency cap): not attempts, counted apart
    # a branch or split: how many runs took each of its paths, most taken first
    paths: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class TakenPaths:
    """How a deciding step type's log rows say which way each run went (its executor module's `PATHS`)."""

    kind: str  # the `kind` of its decisions
    keys: tuple[str, ...]  # the decision's keys that name the way taken
    words: Callable[[Mapping[str, Any]], str]  # the way taken, in words, from those keys' values


def taken_paths() -> dict[str, TakenPaths]:
    """The step types whose ways are counted, by their decisions' kind."""
    found = (getattr(registry.load(name, "executor"), "PATHS", None) for name in registry.STEP_TYPES)
    return {paths.kind: paths for paths in found if isinstance(paths, TakenPaths)}


def _most_taken_first(item: tuple[str, int]) -> tuple[int, bool, str]:
    """Most taken first; at a tie the default comes after the branches."""
    return (-item[1], item[0].startswith("the default"), item[0])


def workflow_step_counts(*, workflow_id: int, since: datetime) -> list[StepCounts]:
    """Per step (by position in its version): attempts that passed, failed for good, were skipped or retried, and
    the times it was deferred (not an attempt: asked again later)."""
    rows = (
        ExecutionLog.objects.filter(execution__workflow_id=workflow_id, started_at__gte=since)
        .order_by()
        .values("step_index")
        .annotate(
            name=Min("step_name"),
            key=Min("step_key"),
            action_type=Min("action_type"),
            passed=Count("id", filter=Q(outcome=StepOutcome.SUCCEEDED)),
            failed=Count("id", filter=Q(outcome=StepOutcome.FAILED)),
            skipped=Count("id", filter=Q(outcome=StepOutcome.SKIPPED)),
            retried=Count("id", filter=Q(outcome=StepOutcome.RETRYING)),
            deferred=Count("id", filter=Q(outcome=StepOutcome.DEFERRED)),
        )
        .order_by("step_index")
    )
    taken: dict[int, dict[str, int]] = {}
    counted = taken_paths()
    keys = sorted({key for paths in counted.values() for key in paths.keys})
    decided = (
        ExecutionLog.objects.filter(
            execution__workflow_id=workflow_id, started_at__gte=since, decision__kind__in=sorted(counted)
        )
        .order_by()
        .values("step_index", "decision__kind", *(f"decision__{key}" for key in keys))
        .annotate(n=Count("id"))
    )
    for row in decided:
        paths = counted[row["decision__kind"]]
        path = paths.words({key: row[f"decision__{key}"] for key in paths.keys})
        per_step = taken.setdefault(row["step_index"], {})
        per_step[path] = per_step.get(path, 0) + row["n"]
    return [
        StepCounts(
            index=row["step_index"],
            name=row["name"] or "",
            key=row["key"] or "",
            action_type=row["action_type"] or "",
            passed=row["passed"],
            failed=row["failed"],
            skipped=row["skipped"],
            retried=row["retried"],
            deferred=row["deferred"],
            paths=sorted(taken.get(row["step_index"], {}).items(), key=_most_taken_first),
        )
        for row in rows
    ]


# --- the operators' dashboard ---------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    """Counts per period (hour or day) and status, oldest first, every period present (zeros too)."""

    periods: list[datetime]
    by_status: dict[str, list[int]]

    def total(self, status: str) -> int:
        return sum(self.by_status.get(status, []))


@dataclass(frozen=True)
class AccountUsage:
    account_id: int
    name: str
    runs_in_progress: int
    max_runs: int
    jobs_running: int
    max_jobs: int


@dataclass(frozen=True)
class Dashboard:
    now: datetime
    runs_per_hour: Series
    runs_per_day: Series
    jobs_by_status: dict[str, int]
    jobs_by_queue: dict[str, dict[str, int]]
    due_jobs: int
    oldest_due_age_seconds: float | None
    # jobs.domain.states.failure_rate, of what finished in the window: jobs, runs, and both together
    job_failure_rate: float | None
    run_failure_rate: float | None
    failure_rate: float | None
    finished_jobs: int
    failed_jobs: int
    finished_runs: int
    failed_runs: int
    dead_letters: int
    usage: list[AccountUsage]
    workers: list[str] = field(default_factory=list)


def _series(runs, *, trunc, start: datetime, step: timedelta, periods: int) -> Series:
    """Runs started from `start` on, counted per period of `step` (truncated by `trunc`) and status."""
    buckets = [start + step * i for i in range(periods)]
    by_status = {status: [0] * periods for status in RUN_STATUSES}
    rows = (
        runs.filter(created_at__gte=start)
        .annotate(period=trunc("created_at"))
        .order_by()
        .values("period", "status")
        .annotate(n=Count("id"))
    )
    for row in rows:
        period = row["period"]
        if period is None or row["status"] not in by_status:
            continue
        index = int((period - start) / step)
        if 0 <= index < periods:
            by_status[row["status"]][index] += row["n"]
    return Series(buckets, by_status)


def dashboard(
    *, account_ids: frozenset[int] | None, job_account_ids: frozenset[int] | None, window_hours: int = 24
) -> Dashboard:
    """The dashboard's numbers: runs of `account_ids`, jobs of `job_account_ids` (each None: every account and,
    for jobs, the system's too; a superuser), as the runs and the jobs pages show them to the same user."""
    now = timezone.now()
    runs = WorkflowExecution.objects.all()
    if account_ids is not None:
        runs = runs.filter(account_id__in=account_ids)
    hour = now.replace(minute=0, second=0, microsecond=0)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    per_hour = _series(runs, trunc=TruncHour, start=hour - timedelta(hours=23), step=timedelta(hours=1), periods=24)
    per_day = _series(runs, trunc=TruncDay, start=day - timedelta(days=29), step=timedelta(days=1), periods=30)
    since = now - timedelta(hours=window_hours)
    queue = queue_overview(account_ids=job_account_ids, since=since)
    finished_runs = (
        runs.filter(completed_at__gte=since, status__in=[ExecutionStatus.COMPLETED, ExecutionStatus.FAILED])
        .order_by()
        .aggregate(
            completed=Count("id", filter=Q(status=ExecutionStatus.COMPLETED)),
            failed=Count("id", filter=Q(status=ExecutionStatus.FAILED)),
        )
    )
    in_progress = {load.account_id: load.running for load in running_executions_by_account(account_ids=account_ids)}
    running = queue.running_by_account
    usage = [
        AccountUsage(
            account_id=account.id,
            name=account.name,
            runs_in_progress=in_progress.get(account.id, 0),
            max_runs=account.max_concurrent_executions,
            jobs_running=running.get(account.id, 0),  # 0 where the role sees no jobs
            max_jobs=account.max_concurrent_jobs,
        )
        for account in accounts_with_limits(account_ids=account_ids, limit=200)
    ]
    return Dashboard(
        now=now,
        runs_per_hour=per_hour,
        runs_per_day=per_day,
        jobs_by_status=queue.by_status,
        jobs_by_queue=queue.by_queue,
        due_jobs=queue.due,
        oldest_due_age_seconds=queue.oldest_due_age_seconds,
        job_failure_rate=queue.failure_rate,
        run_failure_rate=failure_rate(completed=finished_runs["completed"], failed=finished_runs["failed"]),
        # Both together through the one formula: a step that fails for good completes its job, so the queue's
        # own rate stays at 0 while runs fail; a failed run counts as a failure beside the jobs'.
        failure_rate=failure_rate(
            completed=queue.completed_in_window + finished_runs["completed"],
            failed=queue.failed_in_window + finished_runs["failed"],
            dead=queue.dead_in_window,
        ),
        finished_jobs=queue.finished_in_window,
        failed_jobs=queue.failed_in_window + queue.dead_in_window,
        finished_runs=finished_runs["completed"] + finished_runs["failed"],
        failed_runs=finished_runs["failed"],
        dead_letters=queue.dead_letters,
        usage=usage,
        workers=queue.workers_seen,
    )
