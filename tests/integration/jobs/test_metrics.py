"""Prometheus metrics: the text parses with prometheus-client's own parser, each metric moves when it should,
the gauges are counted by one worker per interval and keep their last numbers when a count fails, and the
endpoint refuses whoever may not read it."""

import datetime as dt
import threading
import time

import pytest
from django.db import connections
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.application import metrics
from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.queue import enqueue
from jobs.application.worker import Worker
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job, MetricRefresh
from jobs.infrastructure.store import get_store
from tests.integration.workflows.support import make_workflow, run_due_jobs


@pytest.fixture(autouse=True)
def _fresh_recorder():
    metrics.recorder.take()  # what earlier tests counted in this process is not this test's
    yield
    metrics.recorder.take()


def refresh(**kwargs) -> bool:
    """One worker's maintenance pass asking for the refresh (as if its last ask were long ago)."""
    metrics._last_try = None
    return metrics.refresh_gauges(**kwargs)


def samples(text: bytes | str | None = None) -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition, keyed by (sample name, sorted labels)."""
    if text is None:
        text = metrics.render()
    if isinstance(text, bytes):
        text = text.decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def attempts(found, outcome: str) -> float:
    return found.get(("relay_jobs_attempts_total", (("outcome", outcome),)), 0.0)


def force_refresh_due() -> None:
    MetricRefresh.objects.filter(id=1).update(next_at=timezone.now() - dt.timedelta(days=1))


@pytest.mark.django_db(transaction=True)
def test_attempts_are_counted_by_outcome_and_the_pickup_latency_by_attempt(settings):
    settings.JOB_RETRY_DELAY_SECONDS = 0
    settings.JOB_RETRY_JITTER = 0
    before = samples()
    assert attempts(before, "succeeded") == attempts(before, "retried") == attempts(before, "dead_lettered") == 0

    enqueue("noop", {})
    enqueue("test.fail", {"kind": "server"}, max_attempts=2)  # retried once, then dead
    enqueue("test.fail", {"kind": "validation"})  # permanent: dead-lettered at once
    assert Worker(burst=True, concurrency=1, install_signal_handlers=False).run() == 0  # flushes when it stops

    found = samples()
    assert (attempts(found, "succeeded"), attempts(found, "retried"), attempts(found, "dead_lettered")) == (1, 1, 2)
    assert found[("relay_jobs_pickup_latency_seconds_count", ())] == 4  # every attempt that started
    assert found[("relay_jobs_pickup_latency_seconds_bucket", (("le", "+Inf"),))] == 4
    assert found[("relay_jobs_pickup_latency_seconds_sum", ())] >= 0


@pytest.mark.django_db
def test_counters_of_several_processes_add_up_and_a_failed_flush_keeps_its_counts(monkeypatch):
    metrics.count(metrics.ATTEMPT_SUCCEEDED, 3)
    metrics.flush()
    metrics.count(metrics.ATTEMPT_SUCCEEDED, 2)  # another flush, as another process's would be
    metrics.flush()
    assert attempts(samples(), "succeeded") == 5

    def broken(counts, using="default"):
        raise RuntimeError("database away")

    monkeypatch.setattr(metrics.store, "add_counts", broken)
    metrics.count(metrics.ATTEMPT_RETRIED, 1)
    with pytest.raises(RuntimeError):
        metrics.flush()
    monkeypatch.undo()
    metrics.flush()
    assert attempts(samples(), "retried") == 1


@pytest.mark.django_db
def test_a_rescued_lease_counts_as_a_lease_expiry():
    job = enqueue("noop", {}, max_attempts=1)
    Job.objects.filter(pk=job.pk).update(
        status="running", attempt_number=1, worker_id="gone", lease_expires_at=timezone.now() - dt.timedelta(seconds=5)
    )
    LeaseRescue(using=queue_database()).rescue_expired(get_store())
    metrics.flush()
    found = samples()
    assert found[("relay_jobs_lease_expiries_total", ())] == 1
    assert attempts(found, "dead_lettered") == 1  # it was its last attempt


@pytest.mark.django_db
def test_the_gauges_show_a_due_backlog_and_are_counted_once_per_interval():
    now = timezone.now()
    for _ in range(3):
        enqueue("noop", {})
    enqueue("noop", {}, run_at=now - dt.timedelta(seconds=90))  # due, waiting 90 s past its due time
    enqueue("noop", {}, run_at=now + dt.timedelta(hours=1))  # not due yet
    dead = enqueue("noop", {})
    Job.objects.filter(pk=dead.pk).update(status="dead")
    failed, cancelled = enqueue("noop", {}), enqueue("noop", {})
    Job.objects.filter(pk=failed.pk).update(status="failed")
    Job.objects.filter(pk=cancelled.pk).update(status="cancelled", cancelled_at=now)  # a dead letter too (seed 003)

    assert refresh(interval=30, worker_id="w1") is True
    assert refresh(interval=30, worker_id="w2") is False  # within the interval: nobody again
    assert metrics.refresh_gauges(interval=30, worker_id="w1") is False  # this process asked a moment ago
    found = samples()
    assert found[("relay_jobs_due", ())] == 4
    assert 90 <= found[("relay_jobs_oldest_due_age_seconds", ())] < 120
    assert found[("relay_jobs_dead_lettered", ())] == 3

    Job.objects.filter(status="pending").update(status="completed")
    assert samples()[("relay_jobs_due", ())] == 4  # a scrape counts nothing
    force_refresh_due()
    assert refresh(interval=30, worker_id="w2") is True
    found = samples()
    assert found[("relay_jobs_due", ())] == 0
    assert found[("relay_jobs_oldest_due_age_seconds", ())] == 0


@pytest.mark.django_db
def test_a_count_that_fails_or_is_too_slow_publishes_nothing_and_the_gauge_keeps_its_numbers(monkeypatch):
    enqueue("noop", {})
    refresh(interval=30, worker_id="w1")
    assert samples()[("relay_jobs_due", ())] == 1
    enqueue("noop", {})

    def slow(counts):
        time.sleep(0.2)
        return [({}, 99)]

    def failing(counts):
        raise RuntimeError("count failed")

    monkeypatch.setattr(metrics, "COUNT_TIMEOUT_SECONDS", 0.1)
    monkeypatch.setitem(metrics._gauges, "relay_jobs_due", metrics.GaugeDef("relay_jobs_due", "due", (), slow))
    monkeypatch.setitem(
        metrics._gauges, "relay_jobs_dead_lettered", metrics.GaugeDef("relay_jobs_dead_lettered", "dead", (), failing)
    )
    force_refresh_due()
    assert refresh(interval=30, worker_id="w1") is True
    found = samples()
    assert found[("relay_jobs_due", ())] == 1  # the slow count's 99 was not published
    assert found[("relay_jobs_dead_lettered", ())] == 0  # the failed count kept its last number


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_count_stuck_behind_a_lock_times_out_and_the_gauge_keeps_its_last_number(monkeypatch):
    enqueue("noop", {})
    refresh(interval=30, worker_id="w1")
    assert samples()[("relay_jobs_due", ())] == 1
    enqueue("noop", {})
    monkeypatch.setattr(metrics, "COUNT_TIMEOUT_SECONDS", 0.5)
    locked, release = threading.Event(), threading.Event()

    def hold_the_table():
        other = connections.create_connection(queue_database())
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute("LOCK TABLE jobs_job IN ACCESS EXCLUSIVE MODE")
                locked.set()
                release.wait(10)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    holder = threading.Thread(target=hold_the_table)
    holder.start()
    try:
        assert locked.wait(10)
        force_refresh_due()
        started = time.monotonic()
        assert refresh(interval=30, worker_id="w1") is True
        assert time.monotonic() - started < 5  # each count gave up after 0.5 s
    finally:
        release.set()
        holder.join()
    assert samples()[("relay_jobs_due", ())] == 1  # not 2: the timed-out count published nothing
    force_refresh_due()
    refresh(interval=30, worker_id="w1")
    assert samples()[("relay_jobs_due", ())] == 2


@pytest.mark.django_db
def test_interval_zero_switches_the_counts_off(settings, client):
    enqueue("noop", {})
    assert refresh(interval=0, worker_id="w1") is False
    settings.JOB_METRICS_INTERVAL = 0
    settings.METRICS_TOKEN = "scrape-me"
    text = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).content.decode()
    assert "relay_jobs_attempts_total" in text
    assert "relay_jobs_due" not in text


@pytest.mark.django_db(transaction=True)
def test_runs_started_and_finished_are_counted_per_workflow_and_the_run_gauges_per_account(account, contact):
    from workflows.application.runs.starting import start_run

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "seen"}}])
    start_run(workflow_id=workflow.pk, contact_id=contact.pk)
    refresh(interval=30, worker_id="w1")
    metrics.flush()
    found = samples()
    label = (("workflow", str(workflow.pk)),)
    assert found[("relay_workflow_runs_started_total", label)] == 1
    assert found[("relay_workflow_runs", (("status", "queued"),))] == 1
    assert found[("relay_account_running_executions", (("account", account.slug),))] == 1
    assert found[("relay_account_running_executions_limit", (("account", account.slug),))] == 100

    run_due_jobs()
    metrics.flush()
    found = samples()
    assert found[("relay_workflow_runs_finished_total", (("status", "completed"), *label))] == 1


# --- the endpoint -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_endpoint_does_not_exist_until_a_token_or_addresses_are_set(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []
    assert client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_the_endpoint_refuses_a_missing_or_wrong_token_and_serves_the_right_one(client, settings):
    settings.METRICS_TOKEN = "s3cret-scrape-token"
    settings.METRICS_ALLOWED_IPS = []
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Basic s3cret-scrape-token"}).status_code == 401
    ok = client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"})
    assert ok.status_code == 200
    assert ok["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(ok.content.decode())}
    assert {
        "relay_jobs_attempts",
        "relay_jobs_due",
        "relay_jobs_oldest_due_age_seconds",
        "relay_jobs_dead_lettered",
        "relay_jobs_pickup_latency_seconds",
        "relay_jobs_lease_expiries",
        "relay_workflow_runs",
        "relay_workflow_runs_started",
        "relay_account_running_jobs",
    } <= names
    assert client.post("/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"}).status_code == 405


@pytest.mark.django_db
def test_the_endpoint_serves_only_the_allowed_addresses(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["10.1.0.0/16", "192.0.2.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.2.0.1").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    settings.METRICS_TOKEN = "tok"  # both set: both must hold
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", headers={"Authorization": "Bearer tok"}).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.9.9.9", headers={"Authorization": "Bearer tok"}).status_code == 403


def test_a_bad_allowed_address_and_a_too_long_dead_letter_retention_fail_the_checks(settings):
    from jobs.checks import check_queue_settings

    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/33"]
    settings.JOB_DEAD_LETTER_RETENTION_DAYS = 3651
    ids = {problem.id for problem in check_queue_settings()}
    assert ids == {"jobs.E001", "jobs.E003"}
    settings.METRICS_ALLOWED_IPS = []
    settings.JOB_DEAD_LETTER_RETENTION_DAYS = 3650
    assert check_queue_settings() == []
