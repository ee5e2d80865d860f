"""Job expiry: a deadline to start by. Past it a waiting job is dead-lettered as expired and never runs; a
retry the queue planned moves the deadline past the retry. On both databases."""

import datetime as dt
import json

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.application import metrics, registry
from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.operations import job_retry, job_stats
from jobs.application.queue import InvalidJob, JobSpec, enqueue, enqueue_many
from jobs.application.registry import DeadLetter
from jobs.application.worker import Worker
from jobs.domain.states import JobStatus, dead_letter_reason
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.store import get_store
from jobs.models import Job, MetricCounter

# A claim commits on its own (never inside a caller's transaction), so these tests commit too.
pytestmark = pytest.mark.django_db(transaction=True)


def _overdue(job: Job, seconds: float = 1.0) -> None:
    """Move the job's deadline into the past, as time passing would."""
    Job.objects.filter(pk=job.pk).update(expires_at=database_now() - dt.timedelta(seconds=seconds))


def test_expires_in_is_counted_on_the_database_clock_and_expires_at_is_kept():
    before = database_now()
    relative = enqueue("noop", {}, expires_in=90)
    absolute_at = timezone.now() + dt.timedelta(hours=2)
    absolute = enqueue("noop", {}, expires_at=absolute_at)
    plain = enqueue("noop", {})
    after = database_now()
    stored = {job.pk: job.expires_at for job in Job.objects.all()}
    assert before + dt.timedelta(seconds=90) <= stored[relative.pk] <= after + dt.timedelta(seconds=90)
    assert stored[absolute.pk] == absolute_at
    assert stored[plain.pk] is None


def test_enqueue_many_takes_a_deadline_per_job():
    at = timezone.now() + dt.timedelta(minutes=5)
    ids = enqueue_many(
        [JobSpec("noop", expires_in=dt.timedelta(seconds=30)), JobSpec("noop", expires_at=at), JobSpec("noop")]
    )
    stored = dict(Job.objects.values_list("pk", "expires_at"))
    assert stored[ids[0]] is not None
    assert stored[ids[1]] == at
    assert stored[ids[2]] is None


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"expires_at": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}, "expires_at"),  # in the past
        ({"expires_at": dt.datetime(2099, 1, 1)}, "expires_at"),  # naive
        ({"expires_at": "2099-01-01T00:00:00Z"}, "expires_at"),  # not a datetime
        ({"expires_in": 0}, "expires_in"),
        ({"expires_in": -5}, "expires_in"),
        ({"expires_in": "60"}, "expires_in"),
        ({"expires_in": True}, "expires_in"),
        ({"expires_in": float("nan")}, "expires_in"),
        ({"expires_in": 60, "expires_at": dt.datetime(2099, 1, 1, tzinfo=dt.UTC)}, "expires_in"),  # both
        # A deadline before the job is even due: it could never start.
        (
            {"run_at": dt.datetime(2099, 1, 2, tzinfo=dt.UTC), "expires_at": dt.datetime(2099, 1, 1, tzinfo=dt.UTC)},
            "expires_at",
        ),
        ({"run_at": dt.datetime(2099, 1, 2, tzinfo=dt.UTC), "expires_in": 60}, "expires_in"),
    ],
)
def test_a_bad_deadline_is_refused_naming_the_argument_and_nothing_is_stored(arguments, field):
    with pytest.raises(InvalidJob) as refused:
        enqueue("noop", {}, **arguments)
    assert refused.value.field == field
    with pytest.raises(InvalidJob) as refused_many:
        enqueue_many([JobSpec("noop"), JobSpec("noop", **arguments)])
    assert refused_many.value.field == field
    assert not Job.objects.exists()


def test_the_claim_never_starts_a_job_past_its_deadline_and_the_sweep_dead_letters_it():
    store = get_store()
    expired = enqueue("noop", {}, expires_in=60)
    alive = enqueue("noop", {}, expires_in=3600)
    _overdue(expired)
    claimed = store.claim("w1", None, 10, 60.0)
    assert [job.id for job in claimed] == [alive.pk]
    assert store.expire_overdue() == [expired.pk]
    assert store.expire_overdue() == []  # once
    job = Job.objects.get(pk=expired.pk)
    assert (job.status, job.attempt_number, job.started_at) == (JobStatus.DEAD, 0, None)
    assert job.error_message.startswith("JobExpired: not started before its deadline ")
    assert job.failed_at is not None
    assert dead_letter_reason(job.status, job.error_message) == "expired"
    assert Job.objects.get(pk=alive.pk).status == JobStatus.RUNNING


def test_a_job_still_before_its_deadline_runs_and_a_running_one_is_not_expired():
    store = get_store()
    running = enqueue("noop", {}, expires_in=60)
    store.claim("w1", None, 10, 60.0)
    _overdue(running)  # the deadline passes while it runs: it started in time
    assert store.expire_overdue() == []
    assert Job.objects.get(pk=running.pk).status == JobStatus.RUNNING


@pytest.mark.parametrize("delay", [5.0, 3600.0])
def test_a_planned_retry_moves_the_deadline_past_the_retry(delay):
    store = get_store()
    job = enqueue("noop", {}, expires_in=60)
    before = Job.objects.get(pk=job.pk)
    window = before.expires_at - before.run_at
    (claimed,) = store.claim("w1", None, 1, 60.0)
    assert store.fail(
        "w1", job.pk, claimed.attempt_number, status="retrying", error="ServerFailure: x", delay=delay, started=0.0
    )
    after = Job.objects.get(pk=job.pk)
    assert after.status == JobStatus.RETRYING
    # The retry keeps the window the first attempt had, and the deadline never moves earlier.
    assert after.expires_at >= before.expires_at
    assert after.expires_at - after.run_at >= window - dt.timedelta(milliseconds=5)
    assert store.expire_overdue() == []
    # Once the retry is due, it is claimed (the long backoff did not expire it).
    Job.objects.filter(pk=job.pk).update(run_at=database_now() - dt.timedelta(seconds=1))
    assert [j.id for j in store.claim("w1", None, 1, 60.0)] == [job.pk]


def test_a_final_failure_leaves_the_deadline_alone():
    store = get_store()
    job = enqueue("noop", {}, expires_in=60)
    expires_at = Job.objects.get(pk=job.pk).expires_at
    store.claim("w1", None, 1, 60.0)
    store.fail("w1", job.pk, 1, status="dead", error="ServerFailure: x", delay=None, started=0.0)
    assert Job.objects.get(pk=job.pk).expires_at == expires_at


def test_a_worker_never_runs_an_expired_job_and_tells_its_dead_letter_hook(tmp_path, monkeypatch):
    letters: list[DeadLetter] = []
    monkeypatch.setitem(registry._dead_letter_hooks, "test.record", letters.append)
    path = tmp_path / "runs.jsonl"
    expired = enqueue("test.record", {"path": str(path)}, expires_in=60)
    fresh = enqueue("test.record", {"path": str(path)}, expires_in=3600)
    _overdue(expired)
    worker = Worker(burst=True, concurrency=1, install_signal_handlers=False)
    worker.run()  # the claim skips the expired job (and its rescue service may already sweep it)
    LeaseRescue(using=queue_database()).expire_overdue(get_store())  # what the rescue service does each pass: once only
    metrics.flush()
    expired_counter = MetricCounter.objects.filter(name="relay_jobs_expired_total")
    assert sum(expired_counter.values_list("value", flat=True)) == 1
    ran = [json.loads(line)["job"] for line in path.read_text().splitlines()]
    assert ran == [str(fresh.pk)]
    assert Job.objects.get(pk=expired.pk).status == JobStatus.DEAD
    assert [(letter.id, letter.status) for letter in letters] == [(expired.pk, "dead")]
    assert letters[0].error.startswith("JobExpired:")


def test_an_operators_retry_drops_the_deadline_so_the_job_can_run():
    job = enqueue("noop", {}, expires_in=60)
    _overdue(job)
    get_store().expire_overdue()
    retried = job_retry(job_id=job.pk)
    assert (retried.status, retried.expires_at) == (JobStatus.PENDING, None)
    assert [j.id for j in get_store().claim("w1", None, 1, 60.0)] == [job.pk]


def test_stats_and_the_admin_show_expired_jobs_as_dead_letters_with_their_reason(client, superuser):
    expired = enqueue("noop", {}, expires_in=60)
    _overdue(expired)
    get_store().expire_overdue()
    exhausted = enqueue("noop", {})
    Job.objects.filter(pk=exhausted.pk).update(status=JobStatus.DEAD, error_message="ServerFailure: x")
    failed = enqueue("noop", {})
    Job.objects.filter(pk=failed.pk).update(status=JobStatus.FAILED, error_message="ValidationFailure: x")
    stats = job_stats()
    assert stats.counts["dead"] == 2
    assert stats.dead_letters == {"expired": 1, "attempts_exhausted": 1, "permanent": 1}

    client.force_login(superuser)
    url = reverse("admin:jobs_job_changelist")
    page = client.get(url, {"dead_letter_reason": "expired"})
    assert page.status_code == 200
    assert [job.pk for job in page.context["cl"].result_list] == [expired.pk]
    detail = client.get(reverse("admin:jobs_job_change", args=[expired.pk]))
    assert detail.status_code == 200
    assert b"expired" in detail.content


def test_jobs_queued_with_a_completion_keep_their_deadline():
    """mark_completed(then=...) and a batch handler's completions insert through their own statements."""
    from jobs.application.queue import prepare_job
    from jobs.infrastructure.store import Finished

    store = get_store()
    first, second = enqueue("noop", {}), enqueue("noop", {})
    claimed = {job.id: job for job in store.claim("w1", None, 2, 60.0)}
    at = timezone.now() + dt.timedelta(minutes=10)
    one = prepare_job(JobSpec("noop", expires_in=60))
    acked, _ = store.complete_and_insert("w1", Finished(first.pk, claimed[first.pk].attempt_number, 0.0, 1.0), [one])
    assert acked
    many = [prepare_job(JobSpec("noop", expires_at=at)), prepare_job(JobSpec("noop", expires_in=30))]
    done, _ = store.complete_many_and_insert(
        "w1", [Finished(second.pk, claimed[second.pk].attempt_number, 0.0, 1.0)], many
    )
    assert done == {second.pk}
    stored = dict(Job.objects.values_list("pk", "expires_at"))
    now = database_now()
    assert now < stored[one.id] <= now + dt.timedelta(seconds=60)
    assert stored[many[0].id] == at
    assert now < stored[many[1].id] <= now + dt.timedelta(seconds=30)
