"""The outbox mover (jobs.application.maintenance.outbox), with the queue in its own database: rows committed
to default's outbox reach the queue when the listener wakes the mover, and stopping does not wait the poll."""

import threading
import time

import pytest
from django.db import DEFAULT_DB_ALIAS, transaction

from jobs.application.maintenance.outbox import OutboxMover, drain_outboxes, outboxes_to_move
from jobs.application.queue import enqueue
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job
from tests.support.processes import wait_until

pytestmark = [pytest.mark.queue_apart, pytest.mark.django_db(transaction=True)]


def _enqueue_in_default():
    with transaction.atomic(using=DEFAULT_DB_ALIAS):
        return enqueue("noop", {})  # to default's outbox, with this transaction


def test_a_woken_mover_moves_a_committed_job_and_stops_without_waiting_for_its_poll():
    assert outboxes_to_move(queue_database(), DEFAULT_DB_ALIAS) == [DEFAULT_DB_ALIAS]
    wake = threading.Event()
    mover = OutboxMover(alias=DEFAULT_DB_ALIAS, using=queue_database(), wake=wake, every=60.0)
    mover.start()
    try:
        assert mover.first_pass.wait(10)
        job = _enqueue_in_default()
        assert not Job.objects.filter(pk=job.pk).exists()
        wake.set()  # what the listener on default does at the outbox's NOTIFY
        wait_until(lambda: Job.objects.filter(pk=job.pk).exists(), 10, "the job to reach the queue")
    finally:
        started = time.monotonic()
        assert mover.stop() is True
    assert time.monotonic() - started < 2.0  # not the 60 s poll
    assert mover._source is None
    assert mover._queue is None


def test_burst_mode_drains_the_outboxes_once():
    jobs = [_enqueue_in_default() for _ in range(3)]
    assert drain_outboxes([DEFAULT_DB_ALIAS], queue_database()) == 3
    assert Job.objects.filter(pk__in=[job.pk for job in jobs]).count() == 3
    assert drain_outboxes([DEFAULT_DB_ALIAS], queue_database()) == 0
