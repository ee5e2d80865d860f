"""The claim, the acknowledgement and the lease rules, straight against the database."""

import datetime as dt
import threading
import time

import psycopg
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.domain.states import JobStatus
from jobs.infrastructure.store import ClaimInsideTransaction, Finished, get_store
from jobs.models import Job
from tests.factories import AccountFactory
from tests.support.queue_db import atomic, connection

LEASE = 60.0

# A claim commits on its own (never inside a caller's transaction), so these tests commit too.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store():
    return get_store()


def _status(job_id) -> tuple[str, int]:
    job = Job.objects.get(pk=job_id)
    return job.status, job.attempt_number


def test_claim_takes_due_jobs_in_priority_order_and_leases_them(store):
    low = enqueue("noop", {}, priority=5)
    high = enqueue("noop", {}, priority=-5)
    mid = enqueue("noop", {})
    enqueue("noop", {}, run_at=timezone.now() + dt.timedelta(hours=1))  # not due

    claimed = store.claim("w1", None, 10, LEASE)

    assert [j.id for j in claimed] == [high.pk, mid.pk, low.pk]
    assert all(j.attempt_number == 1 for j in claimed)
    job = Job.objects.get(pk=high.pk)
    assert job.status == JobStatus.RUNNING
    assert job.worker_id == "w1"
    assert job.lease_expires_at > timezone.now() + dt.timedelta(seconds=LEASE - 5)
    assert store.claim("w2", None, 10, LEASE) == []  # nothing left that is due


def test_claim_respects_the_limit_and_the_queues(store):
    enqueue_many([JobSpec("noop", queue="mail") for _ in range(3)] + [JobSpec("noop", queue="sms")])
    assert len(store.claim("w", ["mail"], 2, LEASE)) == 2
    assert [j.queue for j in store.claim("w", ["sms", "other"], 10, LEASE)] == ["sms"]
    assert len(store.claim("w", None, 10, LEASE)) == 1


def test_completion_is_refused_for_a_worker_that_does_not_hold_the_job(store):
    job = enqueue("noop", {})
    (claimed,) = store.claim("w1", None, 1, LEASE)
    now = time.time()
    assert store.complete("intruder", [Finished(claimed.id, 1, now, now)]) == set()
    assert store.complete("w1", [Finished(claimed.id, 2, now, now)]) == set()  # another attempt's
    assert _status(job.pk) == (JobStatus.RUNNING, 1)
    assert store.complete("w1", [Finished(claimed.id, 1, now, now + 0.25)]) == {job.pk}
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == JobStatus.COMPLETED
    assert stored.duration_seconds == pytest.approx(0.25, abs=0.01)
    assert store.complete("w1", [Finished(claimed.id, 1, now, now)]) == set()  # only once


def test_a_rescued_job_cannot_be_completed_or_failed_by_its_old_worker(store):
    job = enqueue("noop", {})
    store.claim("old", None, 1, LEASE)
    Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert [(r[0], r[1]) for r in store.rescue_expired()] == [(job.pk, "pending")]
    (again,) = store.claim("new", None, 1, LEASE)
    assert again.attempt_number == 2

    now = time.time()
    assert store.complete("old", [Finished(job.pk, 1, now, now)]) == set()
    assert not store.fail("old", job.pk, 1, status="failed", error="late", delay=None, started=now)
    assert _status(job.pk) == (JobStatus.RUNNING, 2)
    assert store.complete("new", [Finished(job.pk, 2, now, now)]) == {job.pk}


def test_lease_rescue_counts_the_attempt_and_ends_dead_on_the_last(store):
    job = enqueue("noop", {}, max_attempts=2)
    for attempt, expected in [(1, "pending"), (2, "dead")]:
        (claimed,) = store.claim(f"w{attempt}", None, 1, LEASE)
        assert claimed.attempt_number == attempt
        Job.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
        assert [r[1] for r in store.rescue_expired()] == [expected]
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == JobStatus.DEAD
    assert stored.error_message == "LeaseExpired: worker w2 stopped before finishing attempt 2"
    assert store.rescue_expired() == []


def test_a_live_lease_is_not_rescued(store):
    enqueue("noop", {})
    store.claim("w", None, 1, LEASE)
    assert store.rescue_expired() == []


def test_release_puts_jobs_back_without_counting_the_attempt(store):
    a, b, c = (enqueue("noop", {}) for _ in range(3))
    store.claim("w", None, 3, LEASE)
    assert store.release("w", [a.pk]) == [a.pk]
    assert _status(a.pk) == (JobStatus.PENDING, 0)
    assert sorted(store.release("w")) == sorted([b.pk, c.pk])
    assert _status(c.pk) == (JobStatus.PENDING, 0)
    assert store.release("w") == []


def test_failure_writes_the_decision(store):
    job = enqueue("noop", {})
    store.claim("w", None, 1, LEASE)
    before = timezone.now()
    assert store.fail("w", job.pk, 1, status="retrying", error="ServerFailure: 503", delay=30.0, started=time.time())
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == JobStatus.RETRYING
    assert stored.error_message == "ServerFailure: 503"
    assert stored.retry_delay_seconds == 30.0
    assert before + dt.timedelta(seconds=29) < stored.run_at < before + dt.timedelta(seconds=32)
    assert stored.failed_at is not None
    assert store.claim("w", None, 1, LEASE) == []  # not due for 30 s
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())
    (claimed,) = store.claim("w", None, 1, LEASE)
    assert claimed.attempt_number == 2


def test_an_account_never_runs_more_than_its_limit_and_others_still_get_claimed(store):
    busy = AccountFactory(max_concurrent_jobs=2)
    quiet = AccountFactory()
    enqueue_many([JobSpec("noop", account=busy) for _ in range(50)])
    enqueue("noop", {}, account=quiet, priority=10)  # worst place in the order
    free = enqueue("noop", {}, priority=10)  # no account: no limit

    first = store.claim("w1", None, 10, LEASE)
    # the busy account fills its two slots, and the claim goes on past its backlog to the others
    assert [j.account_id for j in first] == [busy.pk, busy.pk, quiet.pk, None]
    assert first[3].id == free.pk
    assert store.claim("w2", None, 10, LEASE) == []
    assert Job.objects.filter(account=busy, status=JobStatus.RUNNING).count() == 2

    now = time.time()
    store.complete("w1", [Finished(first[0].id, 1, now, now)])
    (next_one,) = store.claim("w1", None, 10, LEASE)  # one slot freed, one job claimed
    assert next_one.account_id == busy.pk


def test_raising_an_accounts_limit_takes_effect_at_the_next_claim(store):
    busy = AccountFactory(max_concurrent_jobs=1)
    enqueue_many([JobSpec("noop", account=busy) for _ in range(5)])
    assert len(store.claim("w", None, 10, LEASE)) == 1
    busy.max_concurrent_jobs = 3
    busy.save(update_fields=["max_concurrent_jobs"])
    assert len(store.claim("w", None, 10, LEASE)) == 2


def test_due_jobs_are_found_in_every_priority_lane_among_jobs_due_later(store):
    later = timezone.now() + dt.timedelta(days=2)
    enqueue_many([JobSpec("noop", priority=p, run_at=later) for p in (-3, 0, 5) for _ in range(20)])
    due_low = enqueue("noop", {}, priority=5)
    due_high = enqueue("noop", {}, priority=-1)
    due_mid = enqueue("noop", {}, priority=0, run_at=timezone.now() - dt.timedelta(seconds=1))
    claimed = store.claim("w", None, 10, LEASE)
    assert [j.id for j in claimed] == [due_high.pk, due_mid.pk, due_low.pk]
    assert Job.objects.filter(status=JobStatus.PENDING).count() == 60


def test_a_claim_refuses_to_run_inside_a_callers_transaction(store):
    enqueue("noop", {})
    with pytest.raises(ClaimInsideTransaction), atomic():
        store.claim("w", None, 1, LEASE)
    assert Job.objects.get().status == JobStatus.PENDING


def test_release_with_a_delay_keeps_the_job_from_being_claimed_at_once(store):
    job = enqueue("noop", {})
    store.claim("w", None, 1, LEASE)
    assert store.release("w", delay=30) == [job.pk]
    assert _status(job.pk) == (JobStatus.PENDING, 0)
    assert store.claim("w2", None, 1, LEASE) == []


@pytest.mark.postgres
def test_claims_wait_for_each_other_so_an_accounts_limit_is_exact():
    """Claimer A holds its claim transaction open; claimer B must see A's claims when it gets its turn."""
    busy = AccountFactory(max_concurrent_jobs=2)
    enqueue_many([JobSpec("noop", account=busy) for _ in range(10)])
    params = {k: v for k, v in connection.get_connection_params().items() if k in ("dbname", "user", "host", "port")}
    seen: dict[str, int] = {}

    def claimer_b() -> None:
        with psycopg.connect(autocommit=True, **params) as conn:
            rows = conn.execute("SELECT * FROM relay_claim_jobs('b', NULL, 10, 60)").fetchall()
            seen["b"] = len(rows)

    with psycopg.connect(**params) as a:  # a transaction, open until the block ends
        seen["a"] = len(a.execute("SELECT * FROM relay_claim_jobs('a', NULL, 10, 60)").fetchall())
        other = threading.Thread(target=claimer_b)
        other.start()
        other.join(0.5)
        assert other.is_alive(), "B must wait for A's claim to commit"
    other.join(5)
    assert seen == {"a": 2, "b": 0}
    assert Job.objects.filter(account=busy, status=JobStatus.RUNNING).count() == 2


def test_an_account_must_be_allowed_at_least_one_running_job(account):
    account.max_concurrent_jobs = 0
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        account.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        type(account).objects.filter(pk=account.pk).update(max_concurrent_jobs=0)
