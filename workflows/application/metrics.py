"""The workflow engine's Prometheus metrics, registered with the queue's (jobs.application.metrics).

Counters: runs started and runs finished (by final status) per workflow, counted when the transaction that
wrote them commits: the run store tells its RunCounts port, which `register()` (from ready()) points here.
Gauges, counted by the refreshing worker: runs by status, and per account the runs counted against
max_concurrent_executions (QUEUED or ACTIVE) beside that limit.
"""

from __future__ import annotations

from collections import Counter

from django.db.models import Count

from jobs.public import metrics
from jobs.public.operations import register_stats_section
from workflows.domain.execution import COUNTED_FOR_LIMIT, ExecutionStatus
from workflows.infrastructure.models import WorkflowExecution
from workflows.infrastructure.store import RunCounts, count_runs_with

RUNS_STARTED = "relay_workflow_runs_started_total"
RUNS_FINISHED = "relay_workflow_runs_finished_total"


def runs_by_status(*, using: str = "default", account_id: int | None = None) -> dict[str, int]:
    counts = {status.value: 0 for status in ExecutionStatus}
    query = WorkflowExecution.objects.using(using).order_by()
    if account_id is not None:
        query = query.filter(account_id=account_id)
    for row in query.values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    return counts


def running_executions_by_account(
    *, using: str = "default", account_ids: frozenset[int] | None = None
) -> list[metrics.AccountLoad]:
    """Runs QUEUED or ACTIVE against max_concurrent_executions, for every account with any (by slug); the
    gauges and the admin's dashboard count through this."""
    query = WorkflowExecution.objects.using(using).filter(status__in=sorted(COUNTED_FOR_LIMIT)).order_by()
    if account_ids is not None:
        query = query.filter(account_id__in=account_ids)
    rows = query.values("account_id", "account__slug", "account__max_concurrent_executions").annotate(n=Count("id"))
    loads = (
        metrics.AccountLoad(r["account_id"], r["account__slug"], r["n"], r["account__max_concurrent_executions"])
        for r in rows
    )
    return sorted(loads, key=lambda load: load.slug)


def _count_started(per_workflow: Counter[int]) -> None:
    for workflow_id, n in per_workflow.items():
        metrics.count((RUNS_STARTED, metrics.labels_key(workflow=str(workflow_id))), n)


def _count_finished(per_workflow_status: Counter[tuple[int, str]]) -> None:
    for (workflow_id, status), n in per_workflow_status.items():
        metrics.count((RUNS_FINISHED, metrics.labels_key(workflow=str(workflow_id), status=status)), n)


# The runs live in `default`, not necessarily in the queue's database that `counts.using` names (JOBS_DATABASE).
def _runs(counts: metrics.CountPass):
    return [({"status": status}, n) for status, n in runs_by_status().items()]


def _executions(counts: metrics.CountPass) -> list[metrics.AccountLoad]:
    return counts.once("workflows.executions", lambda: running_executions_by_account())


def register() -> None:
    count_runs_with(RunCounts(started=_count_started, finished=_count_finished))
    register_stats_section("runs", lambda account_id: runs_by_status(account_id=account_id))
    metrics.register_counter(RUNS_STARTED, "Workflow runs started, per workflow (id).", ("workflow",))
    metrics.register_counter(
        RUNS_FINISHED, "Workflow runs that ended, per workflow (id) and final status.", ("workflow", "status")
    )
    metrics.register_gauge("relay_workflow_runs", "Workflow runs stored, by status.", ("status",), compute=_runs)
    metrics.register_gauge(
        "relay_account_running_executions",
        "Runs QUEUED or ACTIVE (what max_concurrent_executions limits), per account with any.",
        ("account",),
        compute=lambda counts: [({"account": load.slug}, load.running) for load in _executions(counts)],
    )
    metrics.register_gauge(
        "relay_account_running_executions_limit",
        "max_concurrent_executions of each account with runs QUEUED or ACTIVE.",
        ("account",),
        compute=lambda counts: [({"account": load.slug}, load.limit) for load in _executions(counts)],
    )
