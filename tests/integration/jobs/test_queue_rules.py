"""The queue's documented rules: dead-letter retention, cancelled jobs aged from their cancel, malformed
payloads failing at once, missed cron ticks counted."""

import datetime as dt
import time

import pytest
from django.utils import timezone

from jobs.application.operations import cancel_pending_jobs, job_cancel, job_purge
from jobs.application.queue import enqueue
from jobs.application.schedules import fire_due_schedules
from jobs.application.worker import Worker
from jobs.domain.ids import uuid7
from jobs.domain.states import JobStatus
from jobs.models import Job, Schedule


def _job(status: str, **fields) -> Job:
    job = enqueue("noop", {})
    if "created_at" in fields:  # made back then: its id (uuid7) holds its creation time, as enqueue's do
        fields["id"] = uuid7(at=fields["created_at"].timestamp())
    Job.objects.filter(pk=job.pk).update(status=status, **fields)
    return Job.objects.get(pk=fields.get("id", job.pk))


@pytest.mark.django_db
def test_a_long_overdue_job_cancelled_now_is_aged_from_its_cancel_not_its_due_time():
    long_ago = timezone.now() - dt.timedelta(days=30)
    overdue = _job(JobStatus.PENDING, created_at=long_ago, run_at=long_ago)
    also_overdue = _job(JobStatus.RETRYING, created_at=long_ago, run_at=long_ago)
    cancelled = job_cancel(job_id=overdue.pk)
    assert cancelled.cancelled_at is not None
    assert abs((cancelled.cancelled_at - timezone.now()).total_seconds()) < 5
    assert cancel_pending_jobs(ids=[also_overdue.pk]) == 1
    assert Job.objects.get(pk=also_overdue.pk).cancelled_at is not None

    # Cancelled jobs are dead letters (seed 003): swept by the dead-letter retention, from their cancel.
    assert job_purge(retention_days=7, dead_letter_retention_days=7) == 0  # cancelled a moment ago
    Job.objects.filter(pk=overdue.pk).update(cancelled_at=timezone.now() - dt.timedelta(days=8))
    assert job_purge(retention_days=7, dead_letter_retention_days=None) == 0  # dead-letter retention off: kept
    assert job_purge(retention_days=7, dead_letter_retention_days=7) == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [also_overdue.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("days", [None, 0, -5])
def test_dead_letter_retention_unset_zero_or_less_keeps_every_dead_letter(days):
    long_ago = timezone.now() - dt.timedelta(days=400)
    dead = _job(JobStatus.DEAD, created_at=long_ago, failed_at=long_ago)
    failed = _job(JobStatus.FAILED, created_at=long_ago, failed_at=long_ago)
    cancelled = _job(JobStatus.CANCELLED, created_at=long_ago, run_at=long_ago, cancelled_at=long_ago)
    assert job_purge(retention_days=7, dead_letter_retention_days=days) == 0
    assert Job.objects.filter(pk__in=[dead.pk, failed.pk, cancelled.pk]).count() == 3


@pytest.mark.django_db
def test_dead_letters_go_when_they_gave_up_longer_ago_than_the_retention():
    now = timezone.now()
    old = _job(JobStatus.DEAD, created_at=now - dt.timedelta(days=40), failed_at=now - dt.timedelta(days=31))
    # Created long ago, gave up recently (a manual retry, then dead again): kept.
    recent = _job(JobStatus.FAILED, created_at=now - dt.timedelta(days=40), failed_at=now - dt.timedelta(days=1))
    assert job_purge(retention_days=None, dead_letter_retention_days=30) == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not Job.objects.filter(pk=old.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_malformed_payload_fails_at_once_as_permanent_naming_the_key():
    missing = enqueue("test.needs_keys", {"count": 1})
    wrong_type = enqueue("test.needs_keys", {"name": "x", "count": "three"})
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()
    missing, wrong_type = Job.objects.get(pk=missing.pk), Job.objects.get(pk=wrong_type.pk)
    assert (missing.status, missing.attempt_number) == (JobStatus.FAILED, 1)
    assert missing.error_message == "MissingPayloadKey: payload.name: is missing"
    assert (wrong_type.status, wrong_type.attempt_number) == (JobStatus.FAILED, 1)
    assert wrong_type.error_message == "InvalidPayload: payload.count: must be an integer, not str"


@pytest.mark.django_db(transaction=True)
def test_a_workflow_step_job_without_its_run_fails_at_once_naming_the_key():
    job = enqueue("workflow_step", {"step_index": 0}, queue="workflows")
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()
    job = Job.objects.get(pk=job.pk)
    assert (job.status, job.attempt_number) == (JobStatus.FAILED, 1)
    assert job.error_message == "MissingPayloadKey: payload.execution_id: is missing"


@pytest.mark.django_db
def test_ticks_missed_while_no_worker_ran_fire_once_and_are_counted():
    # The ticks are whole minutes: started in a minute's last seconds, a new tick would fall due between the
    # two passes (a flake seen in CI at 14:59:59.99), so begin just after the next minute instead.
    seconds_in = timezone.now().second + timezone.now().microsecond / 1e6
    if seconds_in > 50:
        time.sleep(60.2 - seconds_in)
    now = timezone.now().replace(second=0, microsecond=0)
    tick = now - dt.timedelta(minutes=3)  # this tick and the three after it are due
    Schedule.objects.create(name="every-minute", cron="* * * * *", handler="log_message", next_run_at=tick)
    assert fire_due_schedules() == 1
    assert fire_due_schedules() == 0
    schedule = Schedule.objects.get(name="every-minute")
    assert schedule.missed_ticks == 3
    assert schedule.next_run_at > timezone.now()
    job = Job.objects.get(handler="log_message")
    assert job.payload == {"scheduled_for": tick.isoformat(), "missed_ticks": 3}


@pytest.mark.django_db
def test_a_schedule_reads_its_cron_in_its_time_zone():
    from kernel.cron import next_tick

    after = dt.datetime(2026, 7, 1, 12, 0, tzinfo=dt.UTC)
    assert next_tick("0 9 * * *", after, "Europe/Paris") == dt.datetime(2026, 7, 2, 7, 0, tzinfo=dt.UTC)  # CEST
    winter = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    assert next_tick("0 9 * * *", winter, "Europe/Paris") == dt.datetime(2026, 1, 2, 8, 0, tzinfo=dt.UTC)  # CET
