"""Fair claims by lanes (PostgreSQL): an account's backlog at its limit costs nothing, accounts take turns,
and a lane kept in step by the writers' own transactions never hides a job."""

import datetime as dt
import threading
import time

import psycopg
import pytest
from django.utils import timezone

from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.domain.states import JobStatus
from jobs.infrastructure.store import Finished, get_store
from jobs.models import Job, Lane
from tests.factories import AccountFactory
from tests.support.queue_db import connection

LEASE = 60.0

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def store():
    return get_store()


def _params() -> dict:
    return {k: v for k, v in connection.get_connection_params().items() if k in ("dbname", "user", "host", "port")}


def _buffers_read_by_claim() -> int:
    """Shared buffers one claim touches (EXPLAIN ANALYZE of the function's statements is not visible, so
    count the jobs_job index blocks read through pg_statio between two snapshots)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT coalesce(sum(idx_blks_hit + idx_blks_read), 0) FROM pg_statio_user_indexes"
            " WHERE relname = 'jobs_job'"
        )
        return int(cursor.fetchone()[0])


def test_a_backlog_at_its_limit_is_not_read_by_the_claim(store):
    busy = AccountFactory(max_concurrent_jobs=3)
    quiet = AccountFactory()
    enqueue_many([JobSpec("noop", account=busy) for _ in range(10000)])
    assert {j.account_id for j in store.claim("w", None, 3, LEASE)} == {busy.pk}  # busy is at its limit now
    later = enqueue("noop", {}, account=quiet, priority=10)

    before = _buffers_read_by_claim()
    (claimed,) = store.claim("w", None, 10, LEASE)
    read = _buffers_read_by_claim() - before

    assert claimed.id == later.pk
    assert Job.objects.filter(account=busy, status=JobStatus.RUNNING).count() == 3
    # 10,000 waiting jobs fill ~80 index leaf pages; a claim that walked them would read them all.
    assert read < 60, read


def test_accounts_with_backlogs_take_turns(store):
    accounts = [AccountFactory(max_concurrent_jobs=100) for _ in range(3)]
    for account in accounts:  # the first account's jobs are all older than the others'
        enqueue_many([JobSpec("noop", account=account) for _ in range(10)])

    first = store.claim("w", None, 3, LEASE)
    assert sorted(j.account_id for j in first) == sorted(a.pk for a in accounts)
    second = store.claim("w", None, 2, LEASE)
    third = store.claim("w", None, 2, LEASE)
    # the one left out of the second claim is first in the third; nobody has a third job before all had two
    assert {j.account_id for j in third} - {j.account_id for j in second}
    taken = [j.account_id for j in first + second + third]
    assert sorted(taken.count(a.pk) for a in accounts) == [2, 2, 3]


def test_priority_still_orders_across_accounts(store):
    a, b = AccountFactory(), AccountFactory()
    enqueue_many([JobSpec("noop", account=a) for _ in range(5)])
    urgent = enqueue("noop", {}, account=b, priority=-5)
    lazy = enqueue("noop", {}, priority=5)
    claimed = store.claim("w", None, 10, LEASE)
    assert claimed[0].id == urgent.pk
    assert claimed[-1].id == lazy.pk
    assert len(claimed) == 7


def test_a_lane_found_empty_waits_for_its_next_job(store):
    account = AccountFactory()
    enqueue("noop", {}, account=account)
    store.claim("w", None, 10, LEASE)
    assert store.claim("w", None, 10, LEASE) == []  # the lane gave nothing: raised to "no job"
    lane = Lane.objects.get(account_id=account.pk)
    assert lane.next_due_at.year == 9999

    soon = enqueue("noop", {}, account=account, run_at=timezone.now() + dt.timedelta(seconds=0.3))
    lane.refresh_from_db()
    assert lane.next_due_at == Job.objects.get(pk=soon.pk).run_at  # lowered by the writer
    assert store.claim("w", None, 10, LEASE) == []
    time.sleep(0.35)
    assert [j.id for j in store.claim("w", None, 10, LEASE)] == [soon.pk]


def test_a_retry_and_a_release_bring_the_lane_back(store):
    account = AccountFactory()
    job = enqueue("noop", {}, account=account)
    assert [j.id for j in store.claim("w", None, 1, LEASE)] == [job.pk]
    store.claim("w", None, 1, LEASE)  # finds the lane empty: raised
    assert store.fail("w", job.pk, 1, status="retrying", error="E: x", delay=0.0, started=time.time())
    (again,) = store.claim("w", None, 1, LEASE)
    assert (again.id, again.attempt_number) == (job.pk, 2)
    store.claim("w", None, 1, LEASE)
    assert store.release("w") == [job.pk]
    assert [j.id for j in store.claim("w", None, 1, LEASE)] == [job.pk]


def test_an_operator_update_through_the_orm_brings_the_lane_back(store):
    account = AccountFactory()
    job = enqueue("noop", {}, account=account)
    store.claim("w", None, 1, LEASE)
    now = time.time()
    store.complete("w", [Finished(job.pk, 1, now, now)])
    store.claim("w", None, 1, LEASE)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.PENDING, run_at=timezone.now())
    assert [j.id for j in store.claim("w", None, 1, LEASE)] == [job.pk]


def test_a_job_committed_while_its_lane_is_found_empty_is_not_lost(store):
    """The race the lane locks exist for: a writer has inserted a job (uncommitted) into a lane that was
    due; a claim takes the lane's last visible job and finds it empty. It must not raise the lane past
    the writer's job."""
    account = AccountFactory()
    enqueue("noop", {}, account=account)
    with psycopg.connect(**_params()) as writer:  # a transaction, open until commit
        writer.execute(
            "INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,"
            " attempt_number, max_attempts, account_id, error_message, worker_id)"
            " VALUES (gen_random_uuid(), 'default', 'noop', '{}', 'pending', 0, now(), now(), 0, 3, %s, '', '')",
            [account.pk],
        )
        assert len(store.claim("w", None, 10, LEASE)) == 1
        assert store.claim("w", None, 10, LEASE) == []  # empty now, but the writer holds the lane
        assert Lane.objects.get(account_id=account.pk).next_due_at <= timezone.now()
        writer.commit()
    assert len(store.claim("w", None, 10, LEASE)) == 1


def test_concurrent_claimers_never_run_an_account_over_its_limit():
    accounts = [AccountFactory(max_concurrent_jobs=2) for _ in range(5)]
    enqueue_many([JobSpec("noop", account=a) for a in accounts for _ in range(40)])
    params = _params()
    peak: dict[int, int] = {}
    stop = time.monotonic() + 3
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        try:
            with psycopg.connect(autocommit=True, **params) as conn:
                while time.monotonic() < stop:
                    rows = conn.execute("SELECT id FROM relay_claim_jobs(%s, NULL, 4, 60)", [name]).fetchall()
                    counts = conn.execute(
                        "SELECT account_id, count(*) FROM jobs_job WHERE status = 'running' GROUP BY 1"
                    ).fetchall()
                    for account_id, n in counts:
                        peak[account_id] = max(peak.get(account_id, 0), n)
                    conn.execute(
                        "UPDATE jobs_job SET status = 'completed', lease_expires_at = NULL"
                        " WHERE id = ANY(%s) AND worker_id = %s",
                        [[r[0] for r in rows], name],
                    )
                    if (
                        not rows
                        and not conn.execute(
                            "SELECT 1 FROM jobs_job WHERE status IN ('pending', 'retrying') LIMIT 1"
                        ).fetchall()
                    ):
                        return
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"c{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert max(peak.values()) <= 2
    assert Job.objects.filter(status=JobStatus.COMPLETED).count() == 200  # none left behind
