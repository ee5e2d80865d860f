"""Lease rescue and expiry (jobs.application.maintenance.rescue), as a worker runs it: a service of its own."""

import datetime as dt

import pytest
from django.utils import timezone

from jobs.application import registry
from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.queue import enqueue
from jobs.application.registry import DeadLetter
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job
from tests.support.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _died_holding(job, *, attempt: int = 1) -> None:
    """As if the worker running `job` was killed: its lease passed and nobody finished it."""
    Job.objects.filter(pk=job.pk).update(
        status="running",
        attempt_number=attempt,
        worker_id="gone",
        lease_expires_at=timezone.now() - dt.timedelta(seconds=5),
    )


def test_the_service_rescues_a_dead_workers_jobs_and_expires_overdue_ones_then_stops(monkeypatch):
    letters: list[DeadLetter] = []
    monkeypatch.setitem(registry._dead_letter_hooks, "noop", letters.append)
    again = enqueue("noop", {}, max_attempts=3)
    last = enqueue("noop", {}, max_attempts=1)
    overdue = enqueue("noop", {}, expires_in=60)
    _died_holding(again)
    _died_holding(last)
    Job.objects.filter(pk=overdue.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    service = LeaseRescue(using=queue_database(), every=0.05)
    service.start()
    try:
        wait_until(lambda: Job.objects.get(pk=overdue.pk).status == "dead", 10, "the overdue job to expire")
        wait_until(lambda: len(letters) == 2, 5, "the hooks of the two dead jobs")
    finally:
        assert service.stop() is True
    assert Job.objects.get(pk=again.pk).status == "pending"  # the attempt counted, two left
    assert Job.objects.get(pk=last.pk).status == "dead"  # it was its last attempt
    assert {letter.id for letter in letters} == {last.pk, overdue.pk}
    assert service._store is None  # its private connection was closed


def test_a_failed_pass_drops_its_connection_and_the_next_pass_reconnects(caplog):
    service = LeaseRescue(using=queue_database(), every=0.05)
    service.run_once()
    assert service._store is not None
    service._store.connection.close()
    missing = "/nonexistent/relay-no-such-db"  # a path SQLite cannot create, a name PostgreSQL does not have
    service._store.connection.settings_dict = {**service._store.connection.settings_dict, "NAME": missing}
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever the driver raises for a missing database
        service.run_once()
    service.drop_connections()
    assert service._store is None
    job = enqueue("noop", {}, max_attempts=2)
    _died_holding(job)
    service.run_once()  # a fresh connection
    assert Job.objects.get(pk=job.pk).status == "pending"
    service.drop_connections()
