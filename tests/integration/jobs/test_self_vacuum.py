"""The queue vacuums its own tables when autovacuum does not (jobs.application.vacuum): this machine's
PostgreSQL runs with autovacuum = off, as a badly configured server would."""

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.application.vacuum import QUEUE_TABLES, QueueVacuum
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
    """The worker's kind of connection; jobs_job vacuumed first, so earlier tests' dead rows (a rolled-back
    test's inserts are dead rows too) do not count."""
    conn = private_connection(queue_database(), statement_seconds=0)
    with conn.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) jobs_job, jobs_lane")
    yield conn
    conn.close()


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

    worked = QueueVacuum().keep_vacuumed(own, QUEUE_TABLES)

    assert "jobs_job" in [a.table for a in worked]  # jobs_lane too when earlier tests changed it enough
    after = _stats("jobs_job")
    assert after[1] == vacuums + 1
    assert after[2] == analyzes + 1  # VACUUM (ANALYZE): the changes were due too
    assert after[0] < 100
    assert QueueVacuum().keep_vacuumed(own, QUEUE_TABLES) == []  # nothing left to do: no second VACUUM


def test_a_table_under_its_vacuum_trigger_is_only_analyzed(own, no_autovacuum):
    _churn(200)  # 400 dead rows, under jobs_job's 1,000; 600 rows changed, over its analyze trigger (54)
    wait_until(lambda: _stats("jobs_job")[0] >= 400, 15, "the churn's dead rows in the statistics")
    _, vacuums, analyzes = _stats("jobs_job")

    assert [a.table for a in QueueVacuum().keep_vacuumed(own, ["jobs_job"])] == ["jobs_job"]

    assert _stats("jobs_job")[1:] == (vacuums, analyzes + 1)  # ANALYZE alone
    assert QueueVacuum().keep_vacuumed(own, ["jobs_job"]) == []


def test_a_vacuum_an_open_transaction_holds_back_is_not_repeated_until_later(own, no_autovacuum, monkeypatch, caplog):
    import jobs.application.vacuum as vacuum_module

    monkeypatch.setattr(vacuum_module, "CHECK_SECONDS", 0.5)  # the first wait after a held-back VACUUM
    report = private_connection(queue_database())  # a long report: its snapshot sees every row as it was
    report.set_autocommit(False)
    with report.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("SELECT count(*) FROM jobs_job")
    passes = QueueVacuum()
    try:
        _churn(3000)
        wait_until(lambda: _stats("jobs_job")[0] >= 6000, 15, "the churn's dead rows in the statistics")
        assert "jobs_job" in [a.table for a in passes.keep_vacuumed(own, ["jobs_job"])]
        assert _stats("jobs_job")[0] >= 6000  # nothing could be removed
        assert "VACUUM of jobs_job left" in caplog.text
        assert "an open transaction still sees them" in caplog.text
        vacuums = _stats("jobs_job")[1]
        assert passes.keep_vacuumed(own, ["jobs_job"]) == []  # not again at once, for nothing
        assert _stats("jobs_job")[1] == vacuums
    finally:
        report.rollback()
        report.close()
    wait_until(lambda: passes.keep_vacuumed(own, ["jobs_job"]), 10, "the VACUUM after the wait")
    assert _stats("jobs_job")[0] < 100  # the report is gone: now it cleans
    assert passes.keep_vacuumed(own, ["jobs_job"]) == []


def test_the_workers_keep_the_engines_churning_tables_too():
    from jobs.application.vacuum import tables_to_keep

    targets = dict(tables_to_keep(queue_database(), []))
    assert {"jobs_job", "jobs_lane"} <= set(targets[queue_database()])
    assert {"workflows_workflowexecution", "workflows_eventwait"} <= set(targets["default"])  # workflows' ready()
