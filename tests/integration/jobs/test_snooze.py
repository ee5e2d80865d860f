"""A handler snoozes its job: back to pending later, on the database's clock, its attempt uncounted, its lease
released, `snoozes` counted on the row and in /metrics. Straight against the store, then through a worker."""

import datetime as dt
import math
import time

import pytest
from django.utils import timezone

from jobs.application import metrics
from jobs.application.queue import enqueue
from jobs.application.worker import Worker
from jobs.domain.snooze import InvalidSnooze, JobSnooze, snooze_seconds
from jobs.domain.states import JobStatus
from jobs.infrastructure.store import get_store
from jobs.models import Job
from tests.support.handlers import read_records

LEASE = 60.0

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store():
    return get_store()


@pytest.fixture(autouse=True)
def _fresh_recorder():
    metrics.recorder.take()
    yield
    metrics.recorder.take()


def test_a_snooze_puts_the_job_back_later_uncounted_and_counts_the_snooze(store):
    job = enqueue("noop", {}, max_attempts=1)
    store.claim("w", None, 1, LEASE)
    before = timezone.now()
    assert store.snooze("w", job.pk, 1, delay=30.0, started=time.time())
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempt_number, stored.snoozes) == (JobStatus.PENDING, 0, 1)
    assert stored.lease_expires_at is None
    assert before + dt.timedelta(seconds=29) < stored.run_at < timezone.now() + dt.timedelta(seconds=31)
    assert store.claim("w", None, 1, LEASE) == []  # not due for 30 s
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())
    (again,) = store.claim("w", None, 1, LEASE)
    # Its one attempt was not used up by the snooze: max_attempts 1, and it runs as attempt 1 again.
    assert (again.attempt_number, again.max_attempts) == (1, 1)
    assert store.snooze("w", job.pk, 1, delay=0.0, started=time.time())
    assert Job.objects.get(pk=job.pk).snoozes == 2


def test_a_snooze_is_refused_to_a_worker_that_does_not_hold_the_attempt(store):
    job = enqueue("noop", {})
    store.claim("w1", None, 1, LEASE)
    assert not store.snooze("intruder", job.pk, 1, delay=10.0, started=time.time())
    assert not store.snooze("w1", job.pk, 2, delay=10.0, started=time.time())  # another attempt's
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempt_number, stored.snoozes) == (JobStatus.RUNNING, 1, 0)


def test_a_snooze_moves_a_deadline_as_a_planned_retry_does(store):
    job = enqueue("noop", {}, expires_in=60)
    window = Job.objects.get(pk=job.pk).expires_at - Job.objects.get(pk=job.pk).run_at
    store.claim("w", None, 1, LEASE)
    assert store.snooze("w", job.pk, 1, delay=3600.0, started=time.time())
    stored = Job.objects.get(pk=job.pk)
    assert stored.expires_at - stored.run_at == pytest.approx(window, abs=dt.timedelta(seconds=1))
    assert stored.expires_at > timezone.now() + dt.timedelta(minutes=59)


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf, "10", True, 401 * 86_400])
def test_a_snooze_of_no_sensible_number_of_seconds_is_refused(bad):
    with pytest.raises(InvalidSnooze):
        snooze_seconds(bad)
    with pytest.raises(InvalidSnooze):
        JobSnooze(bad)


def _snoozes(found, handler: str) -> float:
    return found.get(("relay_jobs_snoozes_total", (("handler", handler),)), 0.0)


def test_a_worker_snoozes_a_handler_that_asks_and_runs_it_again_when_due(tmp_path, settings):
    """Through the worker: two snoozes (one by `job.snooze`, one raised) and then a completion, on a job that may
    make one attempt; each run is attempt 1, the row counts two snoozes, /metrics too."""
    from tests.integration.jobs.test_metrics import samples

    path = str(tmp_path / "runs.jsonl")
    by_call = enqueue("test.snooze", {"path": path, "times": 2, "seconds": 0}, max_attempts=1)
    raised = enqueue("test.snooze", {"path": path, "times": 2, "seconds": 0, "raise": True}, max_attempts=1)
    assert Worker(burst=True, concurrency=1, install_signal_handlers=False).run() == 0

    for job in (by_call, raised):
        stored = Job.objects.get(pk=job.pk)
        assert (stored.status, stored.attempt_number, stored.snoozes) == (JobStatus.COMPLETED, 1, 2)
        runs = [r for r in read_records(path) if r["job"] == str(job.pk)]
        assert [(r["run"], r["attempt"]) for r in runs] == [(1, 1), (2, 1), (3, 1)]
    found = samples()
    assert _snoozes(found, "test.snooze") == 4
    # A snooze is not an attempt: only the two completions are counted as attempts.
    assert found.get(("relay_jobs_attempts_total", (("outcome", "succeeded"),)), 0) == 2
    assert found.get(("relay_jobs_attempts_total", (("outcome", "retried"),)), 0) == 0


def test_a_snoozed_job_still_fails_and_retries_by_its_own_attempts(tmp_path, settings):
    """Snoozes leave every attempt to the failures: a job of two attempts snoozes once, fails, retries, and is
    dead after its second real attempt, not its first."""
    settings.JOB_RETRY_DELAY_SECONDS = 0
    settings.JOB_RETRY_JITTER = 0
    path = str(tmp_path / "runs.jsonl")
    job = enqueue("test.snooze", {"path": path, "times": 1, "seconds": 0, "then_fail": True}, max_attempts=2)
    assert Worker(burst=True, concurrency=1, install_signal_handlers=False).run() == 0
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempt_number, stored.snoozes) == (JobStatus.DEAD, 2, 1)
    runs = [r["attempt"] for r in read_records(path) if r["job"] == str(job.pk)]
    assert runs == [1, 1, 2]


def test_a_job_snoozed_into_the_future_is_not_run_again_by_a_burst_worker(tmp_path):
    path = str(tmp_path / "runs.jsonl")
    job = enqueue("test.snooze", {"path": path, "times": 1, "seconds": 3600})
    assert Worker(burst=True, concurrency=1, install_signal_handlers=False).run() == 0
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempt_number, stored.snoozes) == (JobStatus.PENDING, 0, 1)
    assert stored.run_at > timezone.now() + dt.timedelta(minutes=59)
    assert len(read_records(path)) == 1
