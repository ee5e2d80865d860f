"""Enqueue: joins the caller's transaction, refuses bad jobs, honours unique keys."""

import datetime as dt

import psycopg
import pytest
from django.utils import timezone

from jobs.application.queue import InvalidJob, JobSpec, enqueue, enqueue_many
from jobs.application.registry import UnknownHandler
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.support.queue_db import atomic, connection


@pytest.mark.django_db(transaction=True)
def test_a_job_exists_if_the_enqueuing_transaction_commits():
    with atomic():
        job = enqueue("log_message", {"message": "hi"})
    stored = Job.objects.get(pk=job.pk)
    assert stored.status == JobStatus.PENDING
    assert stored.payload == {"message": "hi"}
    assert stored.max_attempts == 4  # JOB_MAX_RETRIES (3) + the first attempt
    assert stored.attempt_number == 0


@pytest.mark.django_db(transaction=True)
def test_no_job_exists_if_the_enqueuing_transaction_rolls_back():
    class Boom(Exception):
        pass

    with pytest.raises(Boom), atomic():
        enqueue("log_message", {"message": "never"})
        enqueue_many([JobSpec("log_message", {"message": "never either"})])
        raise Boom
    assert Job.objects.count() == 0


def _listen(dsn_params: dict) -> psycopg.Connection:
    params = {k: v for k, v in dsn_params.items() if k in ("dbname", "user", "password", "host", "port")}
    conn = psycopg.connect(autocommit=True, **params)
    conn.execute("LISTEN relay_jobs")
    return conn


def _notifications(conn: psycopg.Connection, wait: float) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=wait, stop_after=10)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_workers_are_notified_at_commit_and_only_on_commit():
    listener = _listen(connection.get_connection_params())
    try:
        with atomic():
            enqueue("log_message", {"message": "a"}, queue="mail")
            enqueue("log_message", {"message": "b"}, queue="mail")
            assert _notifications(listener, 0.2) == []  # nothing before commit
        # PostgreSQL folds identical notifications of one transaction into one.
        assert _notifications(listener, 1.0) == ["mail 1"]

        with pytest.raises(ZeroDivisionError), atomic():
            enqueue("log_message", {"message": "c"})
            1 / 0  # noqa: B018
        assert _notifications(listener, 0.3) == []

        enqueue("log_message", {"message": "later"}, run_at=timezone.now() + dt.timedelta(hours=1))
        assert _notifications(listener, 0.3) == []  # not due: nobody to wake
    finally:
        listener.close()


@pytest.mark.django_db
def test_unknown_handler_is_refused_with_its_name():
    with pytest.raises(UnknownHandler, match="no job handler named 'no_such_handler'"):
        enqueue("no_such_handler", {})
    assert Job.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"payload": ["not", "a", "dict"]}, "payload"),
        ({"payload": {"when": dt.datetime(2020, 1, 1)}}, "payload"),
        ({"payload": {"x": float("nan")}}, "payload"),
        ({"queue": ""}, "queue"),
        ({"queue": "q" * 101}, "queue"),
        ({"priority": True}, "priority"),
        ({"priority": "1"}, "priority"),
        ({"priority": 10**6}, "priority"),
        ({"run_at": dt.datetime(2030, 1, 1)}, "run_at"),  # naive
        ({"max_attempts": 0}, "max_attempts"),
        ({"unique_key": ""}, "unique_key"),
        ({"unique_key": "k" * 201}, "unique_key"),
    ],
)
def test_bad_jobs_are_refused_naming_the_field(kwargs, field):
    payload = kwargs.pop("payload", {})
    with pytest.raises(InvalidJob) as raised:
        enqueue("log_message", payload, **kwargs)
    assert raised.value.field == field
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_a_bad_job_in_a_bulk_enqueue_stores_none_of_them():
    with pytest.raises(InvalidJob):
        enqueue_many([JobSpec("log_message", {"n": 1}), JobSpec("log_message", {"n": 2}, priority="high")])
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_an_unfinished_job_holding_a_unique_key_is_returned_instead_of_a_second():
    first = enqueue("log_message", {"n": 1}, unique_key="digest:42")
    again = enqueue("log_message", {"n": 2}, unique_key="digest:42")
    assert again.pk == first.pk
    assert again.payload == {"n": 1}
    assert Job.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("finished", [JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.FAILED, JobStatus.CANCELLED])
def test_a_finished_job_releases_its_unique_key(finished):
    first = enqueue("log_message", {}, unique_key="digest:7")
    Job.objects.filter(pk=first.pk).update(status=finished)
    second = enqueue("log_message", {}, unique_key="digest:7")
    assert second.pk != first.pk
    assert Job.objects.count() == 2


@pytest.mark.django_db
def test_bulk_enqueue_returns_ids_in_order_and_resolves_keys():
    held = enqueue("log_message", {}, unique_key="k1")
    ids = enqueue_many(
        [
            JobSpec("log_message", {"n": 0}),
            JobSpec("log_message", {"n": 1}, unique_key="k1"),
            JobSpec("log_message", {"n": 2}, unique_key="k2"),
            JobSpec("log_message", {"n": 3}, unique_key="k2"),
        ]
    )
    assert ids[1] == held.pk
    assert ids[2] == ids[3]
    assert len(set(ids)) == 3
    assert Job.objects.count() == 3
    assert Job.objects.get(pk=ids[0]).payload == {"n": 0}


@pytest.mark.django_db
def test_enqueue_records_account_creator_and_options(account, owner):
    run_at = timezone.now() + dt.timedelta(minutes=5)
    job = enqueue(
        "log_message", {}, queue="mail", priority=-5, run_at=run_at, account=account, created_by=owner, max_attempts=9
    )
    stored = Job.objects.get(pk=job.pk)
    assert (stored.queue, stored.priority, stored.max_attempts) == ("mail", -5, 9)
    assert stored.run_at == run_at
    assert stored.account_id == account.pk
    assert stored.created_by_id == owner.pk


@pytest.mark.postgres
@pytest.mark.django_db
def test_bulk_enqueue_of_thousands_is_one_statement_per_chunk(django_assert_max_num_queries):
    with django_assert_max_num_queries(1):
        enqueue_many([JobSpec("noop") for _ in range(3000)])
    assert Job.objects.count() == 3000
