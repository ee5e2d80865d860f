"""What each job costs the database's indexes (issue 15, docs/decisions/job-indexes.md).

A claim and a completion each write a new version of the job's row, never HOT (status is in the claim
index's predicate), so every index whose predicate holds gets a new entry at each of them: an index on
jobs_job is paid up to three times per job. These tests pin which indexes exist and which a job of no
account touches, so that adding one is a decision, not an accident. bench/README.md counts the entries
(`BENCH_CPU=1 bench/queue_throughput.py`, from the WAL).
"""

import time

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.domain.states import JobStatus
from jobs.infrastructure.store import Finished, get_store, private_connection, store_for
from jobs.models import Job
from tests.factories import AccountFactory
from tests.support.queue_db import connection

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs_job'")
        return dict(cursor.fetchall())


def test_the_jobs_table_has_the_indexes_its_reads_need_and_no_others():
    """A job of no account is in three of them over its life (primary key, claim, running): five entries."""
    assert set(_indexes()) == {
        "jobs_job_pkey",  # by id; newest first (uuid7); time bounds (purge, the admin's age filter)
        "job_lane_claim",  # the claim: due jobs only
        "job_running",  # running jobs: per-account counts, lease rescue
        "job_account_newest",  # an account's jobs, newest first (jobs of an account only)
        "job_due_expiry",  # the expiry sweep: waiting jobs with a deadline only
        "job_unique_key",  # unfinished jobs with a key only
    }
    assert "created_at" not in " ".join(_indexes().values())


def test_an_accounts_list_and_the_newest_first_list_read_an_index_not_the_table():
    with connection.cursor() as cursor:
        # The table is empty here: ask whether an index gives the order, not what is cheapest on no rows.
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN SELECT id FROM jobs_job WHERE account_id = 7 ORDER BY id DESC LIMIT 50")
        by_account = " ".join(row[0] for row in cursor.fetchall())
        cursor.execute("EXPLAIN SELECT id FROM jobs_job ORDER BY id DESC LIMIT 50")
        newest = " ".join(row[0] for row in cursor.fetchall())
    assert "job_account_newest" in by_account
    assert "Sort" not in by_account
    assert "jobs_job_pkey" in newest
    assert "Sort" not in newest


@pytest.mark.django_db(transaction=True)
def test_the_claims_running_count_never_reads_the_accounts_index():
    """The claim's plans are generic and made once per connection (force_generic_plan). Made while
    job_account_newest was empty (a new installation, system jobs only), a running count that named
    `account_id IS NOT NULL` read that index from then on: every kept job of every account, per claim."""
    store = get_store()  # system jobs run through: job_running holds their dead entries until a vacuum
    enqueue_many(JobSpec("noop", {"n": n}) for n in range(3000))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    while batch := store.claim("w", None, 100, 60.0):
        store.complete("w", [Finished(j.id, j.attempt_number, 0.0, 0.0) for j in batch])
    enqueue_many(JobSpec("noop", {"n": n}) for n in range(20))
    claimer = private_connection()
    try:
        claimer_store = store_for(claimer)
        assert len(claimer_store.claim("w", None, 10, 60.0)) == 10  # its plans are made now
        account = AccountFactory()
        enqueue_many(JobSpec("noop", {"n": n}, account=account) for n in range(5000))
        Job.objects.filter(account=account).update(status=JobStatus.COMPLETED)

        with claimer.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")  # what it read so far, published now
        before = _index_blocks("job_account_newest")
        assert len(claimer_store.claim("w", None, 10, 60.0)) == 10
    finally:
        claimer.close()
    time.sleep(0.5)  # its exit publishes what it read
    read = _index_blocks("job_account_newest") - before
    assert read < 10, read  # reading it: ~100 blocks for these 5,000 jobs (and growing with every account job)


def _index_blocks(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes WHERE indexrelname = %s", [name]
        )
        return int(cursor.fetchone()[0])
