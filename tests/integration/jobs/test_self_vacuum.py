"""The queue vacuums its own tables when autovacuum does not (jobs.application.vacuum): this machine's
PostgreSQL runs with autovacuum = off, as a badly configured server would."""

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.application.vacuum import QUEUE_TABLES, keep_vacuumed
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.store import private_connection
from jobs.infrastructure.vacuum import server_settings, table_activity
from tests.support.processes import wait_until
from tests.support.queue_db import connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _stats(table: str) -> tuple[int, int, int]:
    """(dead rows, manual vacuums, manual analyzes) as the statistics say now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT n_dead_tup, vacuum_count, analyze_count FROM pg_stat_user_tables WHERE relname = %s", [table]
        )
        return cursor.fetchone()


def _churn(jobs: int) -> None:
    """`jobs` jobs queued and finished, as a worker leaves them: two dead row versions each."""
    enqueue_many(JobSpec("noop", {"i": i}) for i in range(jobs))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET status = 'running', worker_id = 'w', attempt_number = 1")
        cursor.execute("UPDATE jobs_job SET status = 'completed', completed_at = now()")
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts reach the server now
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


@pytest.fixture
def own():
    conn = private_connection(queue_database(), statement_seconds=0)
    yield conn
    conn.close()


@pytest.fixture
def no_autovacuum():
    """jobs_job as on a server with autovacuum off, whatever this one's setting (so autovacuum cannot step in)."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job SET (autovacuum_enabled = false)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job RESET (autovacuum_enabled)")


def test_a_table_over_autovacuums_trigger_is_vacuumed_and_analyzed_then_left_alone(own, no_autovacuum):
    _churn(3000)
    wait_until(lambda: _stats("jobs_job")[0] >= 6000, 15, "the churn's dead rows in the statistics")
    dead, vacuums, analyzes = _stats("jobs_job")
    activity = {a.table: a for a in table_activity(own, QUEUE_TABLES, server_settings(own))}
    assert activity["jobs_job"].dead_rows == dead
    assert activity["jobs_job"].vacuum_threshold == 1000  # migration 0010's storage parameters are read
    assert activity["jobs_job"].vacuum_scale_factor == 0.01
    assert not activity["jobs_job"].autovacuum_on
    assert activity["jobs_job"].cost_delay_ms == 1.0  # throttled as autovacuum would be (migration 0010: 1 ms)
    assert activity["jobs_job"].cost_limit > 0

    worked = keep_vacuumed(own, QUEUE_TABLES)

    assert [a.table for a in worked] == ["jobs_job"]  # jobs_lane: one row, a few HOT updates
    after = _stats("jobs_job")
    assert after[1] == vacuums + 1
    assert after[2] == analyzes + 1  # VACUUM (ANALYZE): the changes were due too
    assert after[0] < 100
    assert keep_vacuumed(own, QUEUE_TABLES) == []  # nothing left to do: no second VACUUM


def test_a_table_under_its_vacuum_trigger_is_only_analyzed(own, no_autovacuum):
    _churn(200)  # 400 dead rows, under jobs_job's 1,000; 600 rows changed, over its analyze trigger (54)
    wait_until(lambda: _stats("jobs_job")[0] >= 400, 15, "the churn's dead rows in the statistics")
    _, vacuums, analyzes = _stats("jobs_job")

    assert [a.table for a in keep_vacuumed(own, ["jobs_job"])] == ["jobs_job"]

    assert _stats("jobs_job")[1:] == (vacuums, analyzes + 1)  # ANALYZE alone
    assert keep_vacuumed(own, ["jobs_job"]) == []
