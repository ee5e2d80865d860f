"""The vacuum service (jobs.application.maintenance.vacuum): the queue's tables kept vacuumed in a thread
of its own, and a VACUUM in flight cancelled when it stops. PostgreSQL with autovacuum off on jobs_job."""

import threading
import time

import pytest

from jobs.application.maintenance.vacuum import QueueVacuuming
from jobs.application.queue import JobSpec, enqueue_many
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.store import private_connection
from tests.support.processes import wait_until
from tests.support.queue_db import connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _vacuums(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s", [table])
        return cursor.fetchone()[0]


def test_the_service_vacuums_a_table_autovacuum_left_and_closes_its_connections(no_autovacuum):
    with connection.cursor() as cursor:
        cursor.execute("VACUUM jobs_job")  # earlier tests' dead rows do not count
    before = _vacuums("jobs_job")
    enqueue_many(JobSpec("noop", {"i": i}) for i in range(2000))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET status = 'completed', completed_at = now()")
        cursor.execute("SELECT pg_stat_force_next_flush()")
    service = QueueVacuuming(using=queue_database(), every=0.1)
    service.start()
    try:
        wait_until(lambda: _vacuums("jobs_job") > before, 20, "the service's VACUUM of jobs_job")
    finally:
        assert service.stop() is True
    assert service._own == {}


def test_stop_cancels_the_vacuum_in_flight():
    """A VACUUM of a big table takes minutes; a stopping worker cancels it (the next pass does it again)."""
    service = QueueVacuuming(using=queue_database(), every=60.0)
    opened: list = []
    failed: list[BaseException] = []

    def long_statement() -> None:  # on a connection of this thread's own, as the service's VACUUM is
        busy = private_connection(queue_database(), statement_seconds=0)
        opened.append(busy)
        try:
            with busy.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(30)")
        except Exception as exc:
            failed.append(exc)
        finally:
            busy.close()

    runner = threading.Thread(target=long_statement, daemon=True)
    runner.start()
    wait_until(_sleeping, 5, "the long statement to run")
    service._vacuuming = opened[0]  # what the service's thread sets while its VACUUM runs
    started = time.monotonic()
    assert service.stop() is True
    runner.join(5)
    assert time.monotonic() - started < 5
    assert len(failed) == 1
    assert "cancel" in str(failed[0]).lower()


def _sleeping() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'")
        return cursor.fetchone()[0] > 0
