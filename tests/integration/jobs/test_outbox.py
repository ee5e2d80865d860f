"""Enqueue's transaction rule with the queue in its own database (JOBS_DATABASE), and the outbox's move.

Most of these need the queue apart (CI's split step sets JOBS_DATABASE_URL); with one database they are
skipped, except the first, which holds the rule's first case everywhere.
"""

import threading

import pytest
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from jobs.application import outbox
from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job, OutboxJob
from jobs.infrastructure.store import get_store, private_connection
from tests.factories import AccountFactory

apart = pytest.mark.queue_apart
pytestmark = pytest.mark.django_db(transaction=True)


def _queued(job_id) -> bool:
    return Job.objects.filter(pk=job_id).exists()


def _in_outbox(job_id) -> bool:
    return OutboxJob.objects.using(DEFAULT_DB_ALIAS).filter(pk=job_id).exists()


def _move_all() -> int:
    """What a worker's outbox thread does, here on private connections."""
    source, queue = private_connection(DEFAULT_DB_ALIAS), private_connection(queue_database())
    try:
        return outbox.move_batch(source, queue)
    finally:
        source.close()
        queue.close()


def test_inside_a_transaction_on_the_queues_database_enqueue_joins_it():
    with pytest.raises(RuntimeError), transaction.atomic(using=queue_database()):
        job = enqueue("noop", {})
        assert _queued(job.pk)  # in this transaction
        raise RuntimeError("roll back")
    assert not _queued(job.pk)
    with transaction.atomic(using=queue_database()):
        kept = enqueue("noop", {})
    assert _queued(kept.pk)


@apart
def test_outside_any_transaction_enqueue_commits_on_the_queues_database():
    job = enqueue("noop", {})
    assert _queued(job.pk)
    assert not _in_outbox(job.pk)


@apart
def test_inside_a_default_transaction_the_job_is_queued_when_it_commits_and_not_before():
    seen_before_commit: dict[str, bool] = {}
    with transaction.atomic():
        job = enqueue("noop", {}, account=AccountFactory())
        # Another connection (a worker) sees nothing yet, in the outbox or the queue.

        def look() -> None:
            seen_before_commit.update(outbox=_in_outbox(job.pk), queue=_queued(job.pk))
            connections.close_all()

        reader = threading.Thread(target=look)
        reader.start()
        reader.join()
    assert seen_before_commit == {"outbox": False, "queue": False}
    assert _in_outbox(job.pk)
    assert not _queued(job.pk)
    assert _move_all() == 1
    stored = Job.objects.get(pk=job.pk)  # the same id it was given at enqueue
    assert stored.status == "pending"
    assert stored.handler == "noop"
    assert not _in_outbox(job.pk)
    assert len(get_store().claim("w", None, 10, 60)) == 1


@apart
def test_inside_a_default_transaction_that_rolls_back_nothing_is_queued():
    with pytest.raises(RuntimeError), transaction.atomic():
        job = enqueue("noop", {})
        ids = enqueue_many([JobSpec("noop") for _ in range(3)])
        raise RuntimeError("roll back")
    assert not _in_outbox(job.pk)
    assert not any(_in_outbox(i) for i in ids)
    assert _move_all() == 0
    assert not Job.objects.exists()


@apart
def test_a_move_repeated_after_a_crash_queues_each_job_once():
    with transaction.atomic():
        ids = enqueue_many([JobSpec("noop", payload={"n": n}) for n in range(5)])
    rows = list(OutboxJob.objects.values_list("id", flat=True))
    assert sorted(rows) == sorted(ids)
    # A mover inserted them and died before its delete committed: the rows are still in the outbox.
    from jobs.infrastructure.outbox import OutboxStore, insert_moved

    source = private_connection(DEFAULT_DB_ALIAS)
    queue = private_connection(queue_database())
    try:
        with source.cursor() as cursor:
            cursor.execute("BEGIN")
            insert_moved(queue, OutboxStore(source).take(100))
            cursor.execute("ROLLBACK")
    finally:
        source.close()
        queue.close()
    assert Job.objects.count() == 5
    assert OutboxJob.objects.count() == 5
    assert _move_all() == 5  # again: nothing doubled
    assert Job.objects.count() == 5
    assert OutboxJob.objects.count() == 0
    assert sorted(Job.objects.values_list("payload__n", flat=True)) == [0, 1, 2, 3, 4]


@apart
def test_concurrent_movers_share_the_rows_and_queue_each_once():
    with transaction.atomic():
        enqueue_many([JobSpec("noop", payload={"n": n}) for n in range(1200)])
    moved: list[int] = []

    def mover() -> None:
        while True:
            n = _move_all()
            moved.append(n)
            if n == 0:
                return

    threads = [threading.Thread(target=mover) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(moved) == 1200
    assert Job.objects.count() == 1200
    assert OutboxJob.objects.count() == 0


@apart
def test_a_cancelled_job_still_in_the_outbox_never_reaches_the_queue():
    from jobs.application.operations import cancel_pending_jobs

    with transaction.atomic():
        job = enqueue("noop", {})
    with transaction.atomic():
        cancel_pending_jobs(ids=[job.pk])
    assert not _in_outbox(job.pk)
    assert _move_all() == 0
    assert not _queued(job.pk)


@apart
def test_a_key_held_in_the_queue_drops_the_outbox_job_at_the_move():
    holder = enqueue("noop", {}, unique_key="k1")
    with transaction.atomic():
        second = enqueue("noop", {}, unique_key="k1")
    assert second.pk != holder.pk  # not resolved at enqueue: the queue is another database
    assert _move_all() == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [holder.pk]
