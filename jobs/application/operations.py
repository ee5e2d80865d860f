"""What operators do to the queue: retry, cancel, purge, look. The admin and the API call these; the
dashboard's overview of the queue is counted in `jobs.application.queue_counts`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import IntegrityError
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q, QuerySet
from django.db.models.functions import Now

from jobs.application.outbox import drop_from_outboxes
from jobs.domain.ids import uuid7_floor
from jobs.domain.states import (
    ATTEMPTS_EXHAUSTED,
    CANCELLABLE,
    DEAD_LETTERS,
    EXPIRED,
    EXPIRED_ERROR_PREFIX,
    GAVE_UP,
    MANUALLY_RETRYABLE,
    PERMANENT,
    JobStatus,
    check_cancel,
    check_manual_retry,
    failure_rate,
)
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import in_queue_transaction, queue_atomic, with_account
from jobs.infrastructure.models import Job
from jobs.infrastructure.store import get_store


class JobNotFound(LookupError):
    def __init__(self, job_id: Any) -> None:
        super().__init__(f"no job with id {job_id}")


class JobConflict(Exception):
    """The job cannot be changed as asked (the API answers 409)."""


def _one(query: QuerySet[Job], job_id: UUID | str, account_id: int | None) -> Job:
    """The job of `query` by id; with `account_id`, another account's job is not found, exactly as a missing
    one (and so is an id that is no UUID)."""
    try:
        pk = job_id if isinstance(job_id, UUID) else UUID(str(job_id))
    except ValueError:
        raise JobNotFound(job_id) from None
    if account_id is not None:
        query = query.filter(account_id=account_id)
    try:
        return query.get(pk=pk)
    except Job.DoesNotExist:
        raise JobNotFound(job_id) from None


def _locked(job_id: UUID | str, account_id: int | None) -> Job:
    """The job, locked until the transaction ends."""
    return _one(Job.objects.select_for_update(), job_id, account_id)


def job_get(*, job_id: UUID | str, account_id: int | None = None) -> Job:
    """One job; with `account_id`, another account's job is not found, exactly as a missing one."""
    return _one(with_account(Job.objects.all()), job_id, account_id)


@in_queue_transaction
def job_retry(*, job_id: UUID | str, account_id: int | None = None) -> Job:
    """Dead, failed or retrying -> pending now, attempts reset to 0, any deadline dropped.

    The operator asks for the work now: an expired job's deadline would only expire it again.
    """
    job = _locked(job_id, account_id)
    check_manual_retry(job.status)
    job.status = JobStatus.PENDING
    job.attempt_number = 0
    job.run_at = database_now()  # due now by the clock the claim compares it with
    job.lease_expires_at = None
    job.expires_at = None
    try:
        with queue_atomic():
            job.save(update_fields=["status", "attempt_number", "run_at", "lease_expires_at", "expires_at"])
    except IntegrityError:
        raise JobConflict(f"another unfinished job already holds unique key {job.unique_key!r}") from None
    get_store().notify(Counter([job.queue]))
    return job


@in_queue_transaction
def job_cancel(*, job_id: UUID | str, account_id: int | None = None) -> Job:
    """Pending or retrying -> cancelled. A running job cannot be cancelled here."""
    job = _locked(job_id, account_id)
    check_cancel(job.status)
    job.status = JobStatus.CANCELLED
    job.cancelled_at = Now()
    job.save(update_fields=["status", "cancelled_at"])
    job.refresh_from_db(fields=["cancelled_at"])
    return job


def cancel_pending_jobs(*, unique_key_prefix: str | None = None, ids: list[UUID] | None = None) -> int:
    """Cancel every pending or retrying job matching; used when what they served is cancelled."""
    query = Job.objects.filter(status__in=[JobStatus.PENDING, JobStatus.RETRYING])
    if unique_key_prefix is not None:
        query = query.filter(unique_key__startswith=unique_key_prefix)
    if ids is not None:
        query = query.filter(pk__in=ids)
        drop_from_outboxes(ids)  # not in the queue yet (the queue apart): they never reach it
    return query.update(status=JobStatus.CANCELLED, cancelled_at=Now())


@dataclass(frozen=True)
class JobStats:
    counts: dict[str, int]
    failure_rate: float | None  # jobs.domain.states.failure_rate of every job stored
    avg_duration_seconds: float | None  # of completed jobs
    sections: dict[str, dict[str, int]] = field(default_factory=dict)  # other apps' counts (workflows: "runs")
    # Dead letters by why they gave up (jobs.domain.states.dead_letter_reason): expired, attempts_exhausted,
    # permanent; they add up to counts["dead"] + counts["failed"].
    dead_letters: dict[str, int] = field(default_factory=dict)


StatsSection = Callable[[int | None], dict[str, int]]  # account id (None: all) -> counts
_stats_sections: dict[str, StatsSection] = {}


def register_stats_section(name: str, counts: StatsSection) -> None:
    """Counts another app adds to the queue's stats (the workflow engine: runs by status), so a failing
    workflow shows beside the jobs that carry it; the queue itself knows nothing of workflows."""
    _stats_sections[name] = counts


def job_stats(*, account_id: int | None = None) -> JobStats:
    query = Job.objects.all()
    if account_id is not None:
        query = query.filter(account_id=account_id)
    counts = {s.value: 0 for s in JobStatus}
    for row in query.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    rate = failure_rate(completed=counts["completed"], failed=counts["failed"], dead=counts["dead"])
    duration = ExpressionWrapper(F("completed_at") - F("started_at"), output_field=DurationField())
    avg = (
        query.filter(status=JobStatus.COMPLETED, started_at__isnull=False, completed_at__isnull=False)
        .order_by()
        .aggregate(avg=Avg(duration))["avg"]
    )
    sections = {name: counts_of(account_id) for name, counts_of in _stats_sections.items()}
    expired = query.filter(status=JobStatus.DEAD, error_message__startswith=EXPIRED_ERROR_PREFIX).count()
    dead_letters = {EXPIRED: expired, ATTEMPTS_EXHAUSTED: counts["dead"] - expired, PERMANENT: counts["failed"]}
    return JobStats(counts, rate, avg.total_seconds() if avg is not None else None, sections, dead_letters)


def job_list(
    *,
    account_id: int | None = None,
    status: str | None = None,
    queue: str | None = None,
    handler: str | None = None,
) -> QuerySet[Job]:
    """Newest first (by id: uuid7, made at enqueue; the primary key or (account, id) serves it). Filters are
    exact; unknown statuses are the caller's to refuse."""
    query = Job.objects.all().order_by("-id")
    if account_id is not None:
        query = query.filter(account_id=account_id)
    if status:
        query = query.filter(status=status)
    if queue:
        query = query.filter(queue=queue)
    if handler:
        query = query.filter(handler=handler)
    return query


def job_purge(*, retention_days: float | None, dead_letter_retention_days: float | None, chunk: int = 5000) -> int:
    """Delete finished jobs past their retention, counted from when they finished, on the queue's clock.

    Completed jobs go `retention_days` after they completed. Dead letters (dead, failed and cancelled: every
    job that ended without its work done) go `dead_letter_retention_days` after they ended
    (`dead_letter_ended_before`), and never when that is unset, 0 or less (0 means "off", not "delete at
    once"). The id narrows the scan to a range of the primary key: a job cannot finish before it was
    enqueued, and its id (uuid7) holds that moment (`uuid7_floor`); a host whose clock ran ahead made ids
    that look younger, so their jobs go late (by that skew), never early. Each chunk starts where the last
    one ended (oldest first, by id): re-reading from the start would walk every row deleted so far, which
    only VACUUM removes from the index, and make a purge of millions of rows quadratic. Each chunk is its
    own short transaction, so the claim never waits for a purge.
    """
    now = database_now()  # the clock that stamped completed_at, failed_at and cancelled_at
    rules: list[tuple[datetime, Q]] = []
    if retention_days is not None:
        cutoff = now - timedelta(days=retention_days)
        rules.append((cutoff, Q(status=JobStatus.COMPLETED, completed_at__lt=cutoff)))
    if dead_letter_retention_days is not None and dead_letter_retention_days > 0:
        cutoff = now - timedelta(days=dead_letter_retention_days)
        rules.append((cutoff, dead_letter_ended_before(cutoff)))
    deleted = 0
    for cutoff, finished_before in rules:
        after = None
        while True:
            batch = Job.objects.filter(finished_before, pk__lt=uuid7_floor(cutoff))
            if after is not None:
                batch = batch.filter(pk__gt=after)
            ids = list(batch.order_by("pk").values_list("pk", flat=True)[:chunk])
            if not ids:
                break
            deleted += Job.objects.filter(finished_before, pk__in=ids).delete()[0]
            after = ids[-1]
    return deleted


def dead_letter_ended_before(cutoff: datetime) -> Q:
    """Dead letters that ended before `cutoff`: a dead or failed job when it gave up (`failed_at`), a cancelled
    one when it was cancelled (`cancelled_at`, else its last failure). One with no such time (written by hand,
    or by an older release) is aged by the later of when it was queued and when it was due: it cannot have
    ended before either, so it is never purged early, and it is purged at last instead of kept forever."""
    cancelled, gave_up = Q(status=JobStatus.CANCELLED), Q(status__in=sorted(GAVE_UP))
    return (
        (gave_up & Q(failed_at__lt=cutoff))
        | (cancelled & Q(cancelled_at__lt=cutoff))
        | (cancelled & Q(cancelled_at__isnull=True, failed_at__lt=cutoff))
        | (
            Q(status__in=sorted(DEAD_LETTERS), failed_at__isnull=True, cancelled_at__isnull=True)
            & Q(created_at__lt=cutoff, run_at__lt=cutoff)
        )
    )


def jobs_carrying(*, payload_key: str, value: str, account_id: int | None = None, limit: int = 50) -> list[Job]:
    """The jobs whose payload holds `value` under `payload_key` (newest first): what carried a piece of work.

    The queue does not know what a payload means; its callers do (the workflow engine: a run's id).
    """
    query = Job.objects.filter(**{f"payload__{payload_key}": value}).order_by("-id")
    if account_id is not None:
        query = query.filter(account_id=account_id)
    return list(query[:limit])


# --- bulk operations by filter ----------------------------------------------------------------------------

BULK_BATCH = 1000  # rows changed per transaction: no lock is held on more than this many jobs at once


@dataclass(frozen=True)
class BulkOutcome:
    matched: int  # rows the filter matched
    changed: int  # rows changed (with dry_run: that would be)
    not_allowed: int  # rows whose state does not allow the operation (or that moved on meanwhile)
    conflicts: int = 0  # retries refused because another unfinished job holds the unique key
    dry_run: bool = False


def job_bulk_filter(
    *,
    account_id: int | None = None,
    status: str | None = None,
    queue: str | None = None,
    handler: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> QuerySet[Job]:
    query = job_list(account_id=account_id, status=status, queue=queue, handler=handler)
    if created_after is not None:
        query = query.filter(created_at__gte=created_after)
    if created_before is not None:
        query = query.filter(created_at__lt=created_before)
    return query


def _batches(query: QuerySet[Job], size: int):
    """(id, status) of the matching jobs in primary-key order, a batch at a time (keyset: no OFFSET scans)."""
    last = None
    while True:
        page = query.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        rows = list(page.values_list("pk", "status")[:size])
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def job_bulk_cancel(*, dry_run: bool = False, batch_size: int = BULK_BATCH, **filters: Any) -> BulkOutcome:
    """Cancel every matching pending or retrying job, a batch per transaction."""
    matched = changed = 0
    for rows in _batches(job_bulk_filter(**filters), batch_size):
        matched += len(rows)
        allowed = [pk for pk, status in rows if status in CANCELLABLE]
        if dry_run:
            changed += len(allowed)
            continue
        with queue_atomic():
            changed += Job.objects.filter(pk__in=allowed, status__in=sorted(CANCELLABLE)).update(
                status=JobStatus.CANCELLED, cancelled_at=Now()
            )
    return BulkOutcome(matched, changed, matched - changed, dry_run=dry_run)


def job_bulk_retry(*, dry_run: bool = False, batch_size: int = BULK_BATCH, **filters: Any) -> BulkOutcome:
    """Retry every matching dead, failed or retrying job now (attempts reset), a batch per transaction.

    A job whose unique key another unfinished job holds stays as it is and is counted in `conflicts`.
    """
    matched = changed = conflicts = 0
    queues: Counter[str] = Counter()
    for rows in _batches(job_bulk_filter(**filters), batch_size):
        matched += len(rows)
        allowed = [pk for pk, status in rows if status in MANUALLY_RETRYABLE]
        if dry_run:
            changed += len(allowed)
            continue
        retry = {
            "status": JobStatus.PENDING,
            "attempt_number": 0,
            "run_at": Now(),
            "lease_expires_at": None,
            "expires_at": None,  # an operator's retry asks for the work whatever its deadline was
        }
        eligible = Job.objects.filter(pk__in=allowed, status__in=sorted(MANUALLY_RETRYABLE))
        try:
            with queue_atomic():
                queues.update(eligible.values_list("queue", flat=True))
                changed += eligible.update(**retry)
        except IntegrityError:  # a unique key held by another unfinished job: one by one, to find which
            for pk in allowed:
                try:
                    with queue_atomic():
                        one = Job.objects.filter(pk=pk, status__in=sorted(MANUALLY_RETRYABLE))
                        queues.update(one.values_list("queue", flat=True))
                        changed += one.update(**retry)
                except IntegrityError:
                    conflicts += 1
    if queues:
        get_store().notify(Counter(dict.fromkeys(queues, 1)))
    return BulkOutcome(matched, changed, matched - changed - conflicts, conflicts, dry_run)
