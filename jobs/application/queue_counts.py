"""The queue's counts: what is due and how late, the dead letters, each account's running jobs against its
limit, and the operators' overview of them all.

Plain selectors, usable by any page that shows queue health: the Prometheus gauges
(`jobs.application.metrics`) and the admin's dashboard count through the same ones, so the two never
disagree on what "due" or "a dead letter" means.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min, Q, QuerySet

from jobs.domain.states import DEAD_LETTERS, DUE_STATES, GAVE_UP, JobStatus, failure_rate
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job


@dataclass(frozen=True)
class AccountLoad:
    """What an account has running now against its limit (jobs here; runs for the workflow engine)."""

    account_id: int
    slug: str
    running: int
    limit: int


def _jobs(using: str, account_ids: frozenset[int] | None) -> QuerySet[Job]:
    """Every job (None: the system's too), or only those accounts' jobs."""
    jobs = Job.objects.using(using).order_by()
    return jobs if account_ids is None else jobs.filter(account_id__in=account_ids)


def due_summary(
    *, now: datetime, using: str | None = None, account_ids: frozenset[int] | None = None
) -> tuple[int, float]:
    """(jobs a worker could claim now, seconds the oldest of them has waited past its due time; 0 if none)."""
    using = using or queue_database()
    row = (
        _jobs(using, account_ids)
        .filter(status__in=sorted(DUE_STATES), run_at__lte=now)
        .aggregate(n=Count("id"), oldest=Min("run_at"))
    )
    oldest = row["oldest"]
    return row["n"], max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0


def dead_letter_count(*, using: str | None = None, account_ids: frozenset[int] | None = None) -> int:
    """Dead letters still stored: dead, failed and cancelled jobs (`DEAD_LETTERS`)."""
    using = using or queue_database()
    return _jobs(using, account_ids).filter(status__in=sorted(DEAD_LETTERS)).count()


def running_jobs_by_account(
    *, using: str | None = None, account_ids: frozenset[int] | None = None
) -> list[AccountLoad]:
    """Jobs running now against max_concurrent_jobs, for every account with a job running (by slug)."""
    using = using or queue_database()
    running = dict(
        _jobs(using, account_ids)
        .filter(status=JobStatus.RUNNING)  # status alone: job_running serves it, never job_account_newest
        .values_list("account_id")
        .annotate(n=Count("id"))
    )
    running.pop(None, None)  # jobs of no account
    if not running:
        return []
    # The accounts are read apart (they may live in another database than the queue's), by primary key.
    accounts = Job._meta.get_field("account").related_model._default_manager.filter(pk__in=list(running))
    loads = (
        AccountLoad(pk, slug, running[pk], limit)
        for pk, slug, limit in accounts.values_list("pk", "slug", "max_concurrent_jobs")
    )
    return sorted(loads, key=lambda load: load.slug)


@dataclass(frozen=True)
class QueueOverview:
    """The queue at a glance, for the operators' dashboard: from the table at the moment of asking, counted by
    the same selectors as the Prometheus gauges (`jobs.application.metrics`)."""

    by_status: dict[str, int]
    by_queue: dict[str, dict[str, int]]
    due: int
    oldest_due_age_seconds: float | None  # None: nothing is due
    dead_letters: int
    completed_in_window: int  # since the window's start
    failed_in_window: int
    dead_in_window: int
    running_by_account: dict[int, int]
    workers_seen: list[str]  # workers holding a job, or that started one in the last minute

    @property
    def finished_in_window(self) -> int:
        return self.completed_in_window + self.failed_in_window + self.dead_in_window

    @property
    def failure_rate(self) -> float | None:
        """Of the jobs that finished in the window."""
        return failure_rate(completed=self.completed_in_window, failed=self.failed_in_window, dead=self.dead_in_window)


def queue_overview(*, account_ids: frozenset[int] | None, since: datetime) -> QueueOverview:
    """`account_ids` None: every account's jobs and the system's; else only those accounts' jobs."""
    now = database_now()  # the times it compares were stamped by the queue's clock
    jobs = Job.objects.all()
    if account_ids is not None:
        jobs = jobs.filter(account_id__in=account_ids)
    by_status = {row["status"]: row["n"] for row in jobs.order_by().values("status").annotate(n=Count("id"))}
    by_queue: dict[str, dict[str, int]] = {}
    for row in jobs.order_by().values("queue", "status").annotate(n=Count("id")):
        by_queue.setdefault(row["queue"], {})[row["status"]] = row["n"]
    due, oldest_due_age = due_summary(now=now, account_ids=account_ids)
    finished = (
        jobs.filter(
            Q(status=JobStatus.COMPLETED, completed_at__gte=since) | Q(status__in=sorted(GAVE_UP), failed_at__gte=since)
        )
        .order_by()
        .aggregate(
            completed=Count("id", filter=Q(status=JobStatus.COMPLETED)),
            failed=Count("id", filter=Q(status=JobStatus.FAILED)),
            dead=Count("id", filter=Q(status=JobStatus.DEAD)),
        )
    )
    workers = (
        jobs.filter(Q(status=JobStatus.RUNNING) | Q(started_at__gte=now - timedelta(minutes=1)))
        .exclude(worker_id="")
        .order_by()
        .values_list("worker_id", flat=True)
        .distinct()
    )
    return QueueOverview(
        by_status=by_status,
        by_queue=by_queue,
        due=due,
        oldest_due_age_seconds=oldest_due_age if due else None,
        dead_letters=dead_letter_count(account_ids=account_ids),
        completed_in_window=finished["completed"],
        failed_in_window=finished["failed"],
        dead_in_window=finished["dead"],
        running_by_account={load.account_id: load.running for load in running_jobs_by_account(account_ids=account_ids)},
        workers_seen=sorted(set(workers[:100])),
    )
