"""The queue stamps every time it stores on the database's clock, whatever the worker host's clock says.

A worker's host clock here runs two minutes fast (`clock.host_time`, the seam a worker's attempt times come
from), while the database's is right: started_at, completed_at, failed_at and a retry's due time must still be
the database's (within a second), and a duration exactly what the worker measured."""

import datetime as dt
import time

import pytest

from jobs.application.queue import JobSpec, enqueue
from jobs.infrastructure import clock
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.store import Finished, NewJob, get_store
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

SKEW = 120.0
LEASE = 60.0
CLOSE = dt.timedelta(seconds=1.5)


@pytest.fixture
def fast_host(monkeypatch):
    """This host's clock two minutes ahead of the database's; returns it (epoch seconds)."""

    def host_time() -> float:
        return time.time() + SKEW

    monkeypatch.setattr(clock, "host_time", host_time)
    return host_time


@pytest.fixture
def store():
    return get_store()


def _near(value: dt.datetime | None, expected: dt.datetime) -> bool:
    return value is not None and abs(value - expected) < CLOSE


def test_a_completion_is_stamped_on_the_database_clock_with_the_workers_duration(store, fast_host):
    job = enqueue("noop", {})
    (claimed,) = store.claim("w", None, 1, LEASE)
    finished = fast_host()
    assert store.complete("w", [Finished(claimed.id, 1, finished - 0.75, finished)]) == {job.pk}
    stored = Job.objects.get(pk=job.pk)
    now = database_now()
    assert _near(stored.completed_at, now), f"completed {(stored.completed_at - now).total_seconds():.1f} s off"
    assert _near(stored.started_at, now - dt.timedelta(seconds=0.75))
    assert stored.duration_seconds == pytest.approx(0.75, abs=0.01)


def test_a_batch_of_completions_is_stamped_on_the_database_clock(store, fast_host):
    jobs = [enqueue("noop", {}) for _ in range(3)]
    claimed = store.claim("w", None, 3, LEASE)
    finished = fast_host()
    done = [Finished(c.id, 1, finished - 2.0 + n * 0.5, finished - n * 0.25) for n, c in enumerate(claimed)]
    assert store.complete("w", done) == {j.pk for j in jobs}
    now = database_now()
    for d in done:
        stored = Job.objects.get(pk=d.id)
        assert _near(stored.completed_at, now - dt.timedelta(seconds=finished - d.finished))
        assert stored.duration_seconds == pytest.approx(d.finished - d.started, abs=0.01)


def _follower() -> NewJob:
    from jobs.application.queue import prepare_job

    return prepare_job(JobSpec("noop", {}))


def test_a_completion_that_queues_what_follows_is_stamped_on_the_database_clock(store, fast_host):
    job = enqueue("noop", {})
    (claimed,) = store.claim("w", None, 1, LEASE)
    finished = fast_host()
    follower = _follower()
    acked, holders = store.complete_and_insert("w", Finished(claimed.id, 1, finished - 0.5, finished), [follower])
    assert acked
    assert holders == {follower.id: follower.id}
    stored = Job.objects.get(pk=job.pk)
    assert _near(stored.completed_at, database_now())
    assert stored.duration_seconds == pytest.approx(0.5, abs=0.01)


def test_a_batch_handlers_completions_are_stamped_on_the_database_clock(store, fast_host):
    jobs = [enqueue("noop", {}) for _ in range(2)]
    claimed = store.claim("w", None, 2, LEASE)
    finished = fast_host()
    done = [Finished(c.id, 1, finished - 1.0, finished) for c in claimed]
    acked, _holders = store.complete_many_and_insert("w", done, [_follower(), _follower()])
    assert acked == {j.pk for j in jobs}
    now = database_now()
    for j in jobs:
        stored = Job.objects.get(pk=j.pk)
        assert _near(stored.completed_at, now)
        assert _near(stored.started_at, now - dt.timedelta(seconds=1.0))


def test_a_retry_is_due_its_delay_after_the_databases_failure_time(store, fast_host):
    job = enqueue("noop", {})
    store.claim("w", None, 1, LEASE)
    started = fast_host() - 0.5
    assert store.fail("w", job.pk, 1, status="retrying", error="ServerFailure: 503", delay=30.0, started=started)
    stored = Job.objects.get(pk=job.pk)
    now = database_now()
    assert _near(stored.failed_at, now)
    assert stored.run_at - stored.failed_at == dt.timedelta(seconds=30)
    assert _near(stored.started_at, now - dt.timedelta(seconds=0.5))


@pytest.fixture
def fast_web_host(monkeypatch):
    """Django's `timezone.now` (what an operator's request or a worker reads from its host) two minutes fast; the
    database's clock right (on SQLite, the seam `clock.host_now` standing for it)."""
    from django.utils import timezone

    real = timezone.now
    monkeypatch.setattr(clock, "host_now", lambda: real())
    monkeypatch.setattr(timezone, "now", lambda: real() + dt.timedelta(seconds=SKEW))


def test_an_operators_retry_is_due_now_by_the_databases_clock(store, fast_web_host):
    from jobs.application.operations import job_retry

    job = enqueue("noop", {})
    store.claim("w", None, 1, LEASE)
    store.fail("w", job.pk, 1, status="dead", error="E: x", delay=None, started=clock.host_time())
    job_retry(job_id=job.pk)
    assert _near(Job.objects.get(pk=job.pk).run_at, database_now())
    assert [c.id for c in store.claim("w", None, 1, LEASE)] == [job.pk]  # not two minutes from now


def test_the_gauges_are_stamped_with_the_databases_now(fast_web_host):
    from jobs.application import metrics
    from jobs.infrastructure import metrics as stored

    metrics._last_try = None
    assert metrics.refresh_gauges(interval=30, worker_id="w")
    computed = {at for _name, _labels, _value, at in stored.gauges()}
    assert computed
    assert all(_near(at, database_now()) for at in computed)
    last = stored.last_refresh()
    assert _near(last, database_now())


def test_a_unit_of_work_reads_the_databases_now_once_and_every_app_asks_it(fast_web_host):
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from kernel import clock as kernel_clock

    with transaction.atomic():
        with CaptureQueriesContext(connection) as queries:
            first = clock.transaction_now()
            second = kernel_clock.now()  # contacts' events ask the kernel's port: the same clock, read once
        assert len(queries.captured_queries) == (1 if connection.vendor == "postgresql" else 0)
        assert _near(first, clock.now_of(connection))  # the database's, not the fast host's
        assert first < second < first + dt.timedelta(seconds=1)  # counted on from the read: still in order
    with transaction.atomic():
        clock.remember(connection, first - dt.timedelta(hours=1))  # a read this transaction made anyway
        assert _near(clock.transaction_now(), first - dt.timedelta(hours=1))
    with transaction.atomic():
        assert _near(clock.transaction_now(), clock.now_of(connection))  # a new transaction reads again
