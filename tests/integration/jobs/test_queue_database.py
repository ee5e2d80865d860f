"""The queue in its own database (JOBS_DATABASE): the router, the queue's copy of the accounts' limits, and
what deleting an account or a user does to its jobs. Each test runs with the queue in `default` and, with
JOBS_DATABASE_URL set (CI's split step), with the queue apart."""

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings

from jobs.application import limits
from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.domain.limits import DEFAULT_ACCOUNT_JOB_LIMIT
from jobs.domain.states import JobStatus
from jobs.infrastructure.database import JobsRouter, is_split, queue_database
from jobs.infrastructure.models import AccountLimit, Job, Lane, Schedule
from jobs.infrastructure.store import get_store
from tests.factories import AccountFactory, UserFactory

LEASE = 60.0


def _limit(account) -> int | None:
    return AccountLimit.objects.filter(account_id=account.pk).values_list("max_concurrent_jobs", flat=True).first()


# --- the router ------------------------------------------------------------------------------------------------


def test_with_the_queue_in_default_the_router_decides_nothing():
    router = JobsRouter()
    with override_settings(JOBS_DATABASE="default"):
        assert router.allow_migrate("default", "jobs", "job") is None
        assert router.allow_migrate("default", "accounts", "account") is None
        assert router.db_for_write(Job) == "default"


def test_with_the_queue_apart_its_tables_and_only_its_tables_go_to_its_database():
    from accounts.infrastructure.models import Account

    router = JobsRouter()
    with override_settings(JOBS_DATABASE="jobs"):
        assert queue_database() == "jobs"
        for model in (Job, Lane, Schedule, AccountLimit):
            assert router.db_for_read(model) == "jobs"
            assert router.db_for_write(model) == "jobs"
            assert router.allow_migrate("jobs", "jobs", model._meta.model_name) is True
            assert router.allow_migrate("default", "jobs", model._meta.model_name) is False
        assert router.allow_migrate("jobs", "jobs") is True  # the claim function, the lanes' triggers
        assert router.allow_migrate("default", "jobs") is False
        assert router.db_for_read(Account) is None
        assert router.allow_migrate("jobs", "accounts", "account") is False
        assert router.allow_migrate("default", "accounts", "account") is True
        assert router.allow_migrate("jobs", "contenttypes", "contenttype") is False
        # A job's account is read from `default`, not from the job's database.
        assert router.db_for_read(Account, instance=Job()) == "default"
        assert router.allow_relation(Job(), Account()) is True


@pytest.mark.django_db
def test_a_job_names_its_account_across_databases(account):
    job = enqueue("noop", {}, account=account)
    stored = Job.objects.get(pk=job.pk)
    assert stored._state.db == queue_database()
    assert stored.account == account


def test_the_check_names_a_jobs_database_that_is_not_configured():
    from jobs.checks import check_queue_settings

    with override_settings(JOBS_DATABASE="elsewhere"):
        problems = check_queue_settings()
    assert [p.id for p in problems] == ["jobs.E004"]
    assert "JOBS_DATABASE" in problems[0].msg
    assert "'elsewhere'" in problems[0].msg


# --- the accounts' limits, kept in step ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_accounts_limit_reaches_the_queue_when_it_is_created_and_when_it_changes():
    account = AccountFactory(max_concurrent_jobs=3)
    assert _limit(account) == 3
    account.max_concurrent_jobs = 7
    account.save(update_fields=["max_concurrent_jobs"])
    assert _limit(account) == 7
    account.name = "Renamed"
    account.max_concurrent_jobs = 9  # not saved: update_fields leaves it out
    account.save(update_fields=["name"])
    assert _limit(account) == 7


@pytest.mark.django_db
def test_the_repair_copies_every_limit_and_drops_those_of_accounts_gone():
    from accounts.infrastructure.models import Account

    kept = AccountFactory(max_concurrent_jobs=4)
    missed = AccountFactory(max_concurrent_jobs=2)
    Account.objects.filter(pk=kept.pk).update(max_concurrent_jobs=6)  # an update() sends no signal
    AccountLimit.objects.filter(account_id=missed.pk).delete()  # as if a crash lost it between two commits
    AccountLimit.objects.create(account_id=kept.pk + missed.pk + 1000, max_concurrent_jobs=5)  # no such account
    assert limits.repair_limits() == 3
    assert _limit(kept) == 6
    assert _limit(missed) == 2
    assert set(AccountLimit.objects.values_list("account_id", flat=True)) == set(
        Account.objects.values_list("pk", flat=True)
    )
    assert limits.repair_limits() == 0  # idempotent: nothing left to write


@pytest.mark.django_db(transaction=True)
def test_the_claim_honours_the_queues_own_copy_of_the_limit():
    from accounts.infrastructure.models import Account

    busy = AccountFactory(max_concurrent_jobs=10)
    Account.objects.filter(pk=busy.pk).update(max_concurrent_jobs=2)  # not yet in the queue's copy
    limits.set_account_limit(busy.pk, 3)  # what the queue holds wins
    enqueue_many([JobSpec("noop", account=busy) for _ in range(10)])
    store = get_store()
    assert len(store.claim("w", None, 10, LEASE)) == 3
    assert store.claim("w", None, 10, LEASE) == []


@pytest.mark.django_db(transaction=True)
def test_an_account_the_queue_holds_no_limit_for_runs_with_the_default():
    stranger = AccountFactory(max_concurrent_jobs=1)
    AccountLimit.objects.filter(account_id=stranger.pk).delete()
    enqueue_many([JobSpec("noop", account=stranger) for _ in range(DEFAULT_ACCOUNT_JOB_LIMIT + 5)])
    claimed = get_store().claim("w", None, 100, LEASE)
    assert len(claimed) == DEFAULT_ACCOUNT_JOB_LIMIT


# --- deleting an account or a user -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_deleting_an_account_keeps_its_jobs_which_still_run_without_it():
    account = AccountFactory(max_concurrent_jobs=1)
    waiting = enqueue_many([JobSpec("noop", account=account) for _ in range(3)])
    account.delete()
    jobs = Job.objects.filter(pk__in=waiting)
    assert [j.account_id for j in jobs] == [None, None, None]
    assert not AccountLimit.objects.filter(account_id=account.pk).exists()
    # They moved to the lanes of jobs without an account, and no limit holds them back now.
    assert len(get_store().claim("w", None, 10, LEASE)) == 3


@pytest.mark.django_db(transaction=True)
def test_deleting_a_user_clears_them_from_the_jobs_they_queued():
    user = UserFactory()
    job = enqueue("noop", {}, created_by=user)
    get_user_model().objects.filter(pk=user.pk).delete()
    stored = Job.objects.get(pk=job.pk)
    assert stored.created_by_id is None
    assert stored.status == JobStatus.PENDING


@pytest.mark.django_db
def test_an_account_deleted_in_a_transaction_that_rolls_back_keeps_its_jobs(django_capture_on_commit_callbacks):
    from django.db import DEFAULT_DB_ALIAS, transaction

    account = AccountFactory()
    account_id = account.pk
    job = enqueue("noop", {}, account=account)
    with (
        django_capture_on_commit_callbacks(execute=False, using=DEFAULT_DB_ALIAS) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        account.delete()
        raise RuntimeError("changed my mind")
    if is_split():  # cleared only once the delete commits: nothing was queued for a rolled-back one
        assert callbacks == []
    assert Job.objects.get(pk=job.pk).account_id == account_id
