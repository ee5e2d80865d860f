"""Operator services: retry, cancel, stats, list, purge; cron schedules; Django's tasks framework."""

import datetime as dt
import threading
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.tasks import TaskResultStatus, task
from django.utils import timezone

from jobs.application.operations import (
    JobConflict,
    JobNotFound,
    job_cancel,
    job_list,
    job_purge,
    job_retry,
    job_stats,
)
from jobs.application.queue import enqueue
from jobs.application.schedules import fire_due_schedules, sync_schedules
from jobs.domain.ids import uuid7
from jobs.domain.states import IllegalJobTransition, JobStatus
from jobs.models import Job, Schedule


def _job(status: str, **fields) -> Job:
    job = enqueue("noop", {})
    if "created_at" in fields:  # made back then: its id (uuid7) holds its creation time, as enqueue's do
        fields["id"] = uuid7(at=fields["created_at"].timestamp())
    Job.objects.filter(pk=job.pk).update(status=status, **fields)
    return Job.objects.get(pk=fields.get("id", job.pk))


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.DEAD, JobStatus.FAILED, JobStatus.RETRYING])
def test_retry_puts_the_job_back_to_pending_with_attempts_reset(status):
    job = _job(status, attempt_number=4, run_at=timezone.now() + dt.timedelta(hours=1), error_message="E: x")
    retried = job_retry(job_id=job.pk)
    stored = Job.objects.get(pk=job.pk)
    assert retried.status == stored.status == JobStatus.PENDING
    assert stored.attempt_number == 0
    assert stored.run_at <= timezone.now()
    assert stored.error_message == "E: x"  # the last error stays for the record


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.CANCELLED])
def test_retry_is_refused_for_other_states(status):
    job = _job(status)
    with pytest.raises(IllegalJobTransition, match=f"cannot retry a job that is {status}"):
        job_retry(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).status == status


@pytest.mark.django_db
def test_retry_refuses_when_another_unfinished_job_took_the_unique_key():
    old = enqueue("noop", {}, unique_key="nightly")
    Job.objects.filter(pk=old.pk).update(status=JobStatus.DEAD)
    enqueue("noop", {}, unique_key="nightly")
    with pytest.raises(JobConflict, match="unique key 'nightly'"):
        job_retry(job_id=old.pk)
    assert Job.objects.get(pk=old.pk).status == JobStatus.DEAD


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.RETRYING])
def test_cancel_pending_or_retrying(status):
    job = _job(status)
    assert job_cancel(job_id=job.pk).status == JobStatus.CANCELLED
    assert Job.objects.get(pk=job.pk).status == JobStatus.CANCELLED


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.FAILED])
def test_cancel_is_refused_for_other_states(status):
    job = _job(status)
    with pytest.raises(IllegalJobTransition, match=f"cannot cancel a job that is {status}"):
        job_cancel(job_id=job.pk)


@pytest.mark.django_db
def test_operator_services_scope_by_account(account, other_account):
    job = enqueue("noop", {}, account=other_account)
    for service in (job_cancel, job_retry):
        with pytest.raises(JobNotFound):
            service(job_id=job.pk, account_id=account.pk)
    with pytest.raises(JobNotFound):
        job_cancel(job_id=uuid.uuid4())
    with pytest.raises(JobNotFound):
        job_cancel(job_id="not-a-uuid")


@pytest.mark.django_db
def test_stats_count_each_status_and_compute_failure_rate_and_duration():
    start = timezone.now()
    for seconds in (1, 3):
        _job(JobStatus.COMPLETED, started_at=start, completed_at=start + dt.timedelta(seconds=seconds))
    _job(JobStatus.FAILED)
    _job(JobStatus.DEAD)
    _job(JobStatus.PENDING)
    stats = job_stats()
    assert stats.counts == {
        "pending": 1,
        "running": 0,
        "completed": 2,
        "retrying": 0,
        "failed": 1,
        "dead": 1,
        "cancelled": 0,
    }
    assert stats.failure_rate == pytest.approx(2 / 4)
    assert stats.avg_duration_seconds == pytest.approx(2.0)


@pytest.mark.django_db
def test_stats_before_anything_finished():
    _job(JobStatus.PENDING)
    stats = job_stats()
    assert stats.failure_rate is None
    assert stats.avg_duration_seconds is None


@pytest.mark.django_db
def test_list_filters_and_orders_newest_first(account):
    a = enqueue("noop", {}, queue="mail", account=account)
    b = enqueue("log_message", {}, queue="mail")
    c = enqueue("noop", {}, queue="sms")
    assert list(job_list()) == [Job.objects.get(pk=p) for p in (c.pk, b.pk, a.pk)]
    assert [j.pk for j in job_list(queue="mail")] == [b.pk, a.pk]
    assert [j.pk for j in job_list(handler="noop", queue="mail")] == [a.pk]
    assert [j.pk for j in job_list(account_id=account.pk)] == [a.pk]
    assert list(job_list(status="dead")) == []


@pytest.mark.django_db
def test_purge_counts_retention_from_when_a_job_finished_and_keeps_dead_letters_unless_told():
    old = timezone.now() - dt.timedelta(days=10)
    recent = timezone.now() - dt.timedelta(hours=1)
    done = _job(JobStatus.COMPLETED, created_at=old, completed_at=old)
    scheduled_long_ago = _job(JobStatus.COMPLETED, created_at=old, completed_at=recent)
    cancelled = _job(JobStatus.CANCELLED, created_at=old, run_at=old, cancelled_at=old)
    dead = _job(JobStatus.DEAD, created_at=old, failed_at=old)
    waiting = _job(JobStatus.PENDING, created_at=old, run_at=old)
    assert job_purge(retention_days=7, dead_letter_retention_days=None) == 1
    assert set(Job.objects.values_list("pk", flat=True)) == {scheduled_long_ago.pk, cancelled.pk, dead.pk, waiting.pk}
    assert job_purge(retention_days=7, dead_letter_retention_days=7) == 2
    assert not Job.objects.filter(pk__in=[done.pk, cancelled.pk, dead.pk]).exists()


@pytest.mark.django_db
def test_a_cancelled_job_is_a_dead_letter_kept_until_dead_letter_retention_sweeps_it():
    """Seed 003: a 100-day-old cancelled job was deleted by JOB_RETENTION_DAYS while dead-letter retention was
    off. Cancelled jobs are dead letters: kept by default, swept with the others, from when they were cancelled."""
    long_ago = timezone.now() - dt.timedelta(days=100)
    cancelled = _job(JobStatus.CANCELLED, created_at=long_ago, run_at=long_ago, cancelled_at=long_ago)
    cancelled_lately = _job(
        JobStatus.CANCELLED, created_at=long_ago, run_at=long_ago, cancelled_at=timezone.now() - dt.timedelta(days=2)
    )
    assert job_purge(retention_days=7, dead_letter_retention_days=None) == 0
    assert job_purge(retention_days=7, dead_letter_retention_days=0) == 0  # 0: off
    assert Job.objects.filter(pk__in=[cancelled.pk, cancelled_lately.pk]).count() == 2
    assert job_purge(retention_days=None, dead_letter_retention_days=30) == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [cancelled_lately.pk]  # aged from its cancel


@pytest.mark.django_db
@pytest.mark.parametrize("status", [JobStatus.DEAD, JobStatus.FAILED, JobStatus.CANCELLED])
def test_a_dead_letter_without_a_failure_time_is_aged_by_the_later_of_its_queued_and_due_times(status):
    """Seed 003: a dead letter with no failed_at (nor cancelled_at) was never purged."""
    long_ago, lately = timezone.now() - dt.timedelta(days=100), timezone.now() - dt.timedelta(days=10)
    aged = _job(status, created_at=long_ago, run_at=long_ago, failed_at=None, cancelled_at=None)
    due_lately = _job(status, created_at=long_ago, run_at=lately, failed_at=None, cancelled_at=None)
    queued_lately = _job(status, created_at=lately, run_at=long_ago, failed_at=None, cancelled_at=None)
    assert job_purge(retention_days=7, dead_letter_retention_days=None) == 0
    assert job_purge(retention_days=7, dead_letter_retention_days=30) == 1
    assert not Job.objects.filter(pk=aged.pk).exists()
    assert Job.objects.filter(pk__in=[due_lately.pk, queued_lately.pk]).count() == 2
    assert job_purge(retention_days=7, dead_letter_retention_days=5) == 2


@pytest.mark.django_db
def test_purge_goes_chunk_by_chunk_from_the_oldest_and_misses_none_that_share_a_time():
    old = timezone.now() - dt.timedelta(days=10)
    tie = old + dt.timedelta(minutes=1)
    times = (old, tie, tie, tie, tie + dt.timedelta(days=1))
    gone = [_job(JobStatus.COMPLETED, created_at=t, completed_at=t) for t in times]
    kept = _job(JobStatus.COMPLETED, created_at=old, completed_at=timezone.now())  # finished recently
    assert job_purge(retention_days=7, dead_letter_retention_days=None, chunk=2) == len(gone)
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk]


@pytest.mark.django_db(transaction=True)
def test_a_schedule_fires_once_per_tick_however_many_workers_race_for_it(settings):
    settings.JOB_SCHEDULES = {"digest": {"cron": "*/5 * * * *", "handler": "log_message", "payload": {"m": 1}}}
    sync_schedules()
    Schedule.objects.filter(name="digest").update(next_run_at=timezone.now() - dt.timedelta(seconds=1))
    start = threading.Barrier(4)
    fired: list[int] = []

    def worker() -> None:  # four workers' maintenance passes, at the same moment
        start.wait()
        try:
            fired.append(fire_due_schedules())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(fired) == [0, 0, 0, 1]
    (job,) = Job.objects.filter(handler="log_message")
    assert job.payload["m"] == 1
    assert job.unique_key.startswith("schedule:digest:")
    assert Schedule.objects.get(name="digest").next_run_at > timezone.now()


@pytest.mark.django_db
def test_schedules_that_cannot_fire_are_refused_by_field(settings):
    settings.JOB_SCHEDULES = {"bad": {"cron": "every day", "handler": "nope", "payload": ["x"]}}
    with pytest.raises(ImproperlyConfigured) as raised:
        sync_schedules()
    assert {"cron", "handler", "payload"} <= set(str(raised.value).replace("'", " ").split())


@pytest.mark.django_db
def test_a_broken_schedule_does_not_stop_the_others(settings):
    settings.JOB_SCHEDULES = {"good": {"cron": "* * * * *", "handler": "log_message"}}
    sync_schedules()
    past = timezone.now() - dt.timedelta(seconds=1)
    Schedule.objects.create(
        name="edited-by-hand", cron="* * * * *", handler="log_message", payload=["x"], next_run_at=past
    )
    Schedule.objects.filter(name="good").update(next_run_at=past)
    assert fire_due_schedules() == 1
    assert Job.objects.filter(handler="log_message").count() == 1


@pytest.mark.django_db
def test_builtin_purge_schedule_is_installed():
    sync_schedules()
    assert Schedule.objects.get(name="relay.purge_jobs").handler == "jobs.purge"


@task(priority=50, queue_name="reports")
def build_report(name: str) -> str:
    return f"report {name}"


@pytest.mark.django_db
def test_django_tasks_enqueue_onto_the_queue():
    result = build_report.enqueue("weekly")
    job = Job.objects.get(pk=result.id)
    assert job.handler == "django_task"
    assert job.queue == "reports"
    assert job.priority == -50  # Django: higher first; Relay: lower first
    assert job.payload["args"] == ["weekly"]
    assert result.status == TaskResultStatus.READY
    Job.objects.filter(pk=job.pk).update(status=JobStatus.COMPLETED, completed_at=timezone.now())
    assert build_report.get_result(result.id).status == TaskResultStatus.SUCCESSFUL
