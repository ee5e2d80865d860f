"""A real worker vacuums the queue's tables when autovacuum does not (jobs.application.vacuum)."""

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.support.processes import wait_until
from tests.support.queue_db import connection

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _vacuums() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs_job'")
        return cursor.fetchone()[0]


def test_a_worker_vacuums_the_jobs_it_ran_when_autovacuum_is_off(start_worker, no_autovacuum):
    before = _vacuums()
    worker = start_worker("--concurrency", "2", JOB_POLL_INTERVAL="0.2")
    enqueue_many(JobSpec("noop", {"i": i}) for i in range(3000))  # 6,000 dead row versions once they ran
    wait_until(lambda: not Job.objects.exclude(status=JobStatus.COMPLETED).exists(), 60, "the jobs to run")

    wait_until(lambda: _vacuums() > before, 30, "the worker to vacuum jobs_job")
    worker.wait_for_output("vacuumed jobs_job:")
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs_job'")
        assert cursor.fetchone()[0] < 1000
    assert "could not vacuum" not in worker.output()
