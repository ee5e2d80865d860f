"""A worker whose host clock runs two minutes fast (libfaketime under a real runworker) fires cron ticks on the
database's clock: none early, none skipped."""

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from jobs.infrastructure.clock import database_now
from jobs.models import Job, Schedule
from kernel.cron import next_tick
from tests.support.handlers import read_records
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's `faketime` (.ci/run installs it)
SKEW = 120.0


@pytest.fixture
def libfaketime() -> str:
    if not LIBFAKETIME.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{LIBFAKETIME} is missing: .ci/run installs the Debian package faketime")
        pytest.skip("needs Debian's faketime package (apt-get install faketime)")
    return str(LIBFAKETIME)


def test_a_worker_two_minutes_fast_fires_a_tick_on_time_and_computes_the_next_from_the_database(
    start_worker, tmp_path, libfaketime
):
    path = str(tmp_path / "ticks.jsonl")
    tick = database_now() + dt.timedelta(seconds=10)
    if tick.second >= 55:  # keep the firing well inside one minute, so the next tick is unambiguous
        tick += dt.timedelta(seconds=8)
    schedule = Schedule.objects.create(
        name="every-minute", cron="* * * * *", handler="test.record", payload={"path": path}, next_run_at=tick
    )
    worker = start_worker(
        JOB_HANDLER_MODULES="tests.support.handlers",
        JOB_POLL_INTERVAL="0.2",
        LD_PRELOAD=libfaketime,
        FAKETIME=f"+{SKEW:.0f}s",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    worker.wait_for_output("started", timeout=30)
    assert database_now() < tick, "the worker took too long to start for this test to mean anything"

    records = wait_until(lambda: read_records(path), 40, "the tick's job to run")
    assert records[0]["started"] - time.time() > SKEW - 10, "the worker's clock was not skewed"
    job = Job.objects.get(handler="test.record")
    assert job.created_at >= tick, f"fired {(tick - job.created_at).total_seconds():.1f} s early"
    assert job.payload["scheduled_for"] == tick.isoformat()
    schedule.refresh_from_db()
    # The tick right after this one, not one two minutes on (which would skip two ticks).
    assert schedule.next_run_at == next_tick("* * * * *", tick)
    assert schedule.missed_ticks == 0
    assert Job.objects.filter(handler="test.record").count() == 1


def test_a_worker_two_minutes_fast_stamps_job_times_retries_and_waits_on_the_database_clock(
    start_worker, tmp_path, libfaketime, settings
):
    """Issue 21: with this worker, `wait 10 minutes` ended 11.98 minutes after the database's now, and jobs'
    started_at/completed_at were the worker's clock. Every time the worker writes must be the database's."""
    from jobs.application.queue import enqueue
    from tests.factories import AccountFactory, ContactFactory
    from tests.integration.workflows.support import WebhookServer, make_workflow
    from workflows.application.runs.starting import start_run
    from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]  # the step's URL is checked at publish, in this process
    server = WebhookServer(answers=[(503, {}, "down")]).start()
    account = AccountFactory()
    waiting = make_workflow(
        account,
        [{"action_type": "wait", "config": {"duration": 600}}, {"action_type": "add_tag", "config": {"tag": "done"}}],
        name="waits",
    )
    failing = make_workflow(account, [{"action_type": "webhook", "config": {"url": server.url}}], name="fails")
    path = str(tmp_path / "records.jsonl")
    worker = start_worker(
        JOB_HANDLER_MODULES="tests.support.handlers",
        JOB_POLL_INTERVAL="0.2",
        WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
        LD_PRELOAD=libfaketime,
        FAKETIME=f"+{SKEW:.0f}s",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    worker.wait_for_output("started", timeout=30)
    try:
        before = database_now()
        done = enqueue("test.spin", {"path": path, "seconds": 0.3})  # no sleep: under libfaketime it fails
        retried = enqueue("test.fail", {"path": path}, max_attempts=3)
        wait_run = start_run(workflow_id=waiting.pk, contact_id=ContactFactory(account=account).pk).execution
        retry_run = start_run(workflow_id=failing.pk, contact_id=ContactFactory(account=account).pk).execution

        def settled() -> bool:
            jobs = dict(Job.objects.filter(pk__in=[done.pk, retried.pk]).values_list("pk", "status"))
            runs = dict(
                WorkflowExecution.objects.filter(pk__in=[wait_run.pk, retry_run.pk]).values_list("pk", "status")
            )
            return (
                jobs == {done.pk: "completed", retried.pk: "retrying"}
                and runs.get(wait_run.pk) == "waiting"
                and WorkflowExecution.objects.filter(pk=retry_run.pk, retry_count=1).exists()
            )

        wait_until(settled, 40, "the jobs and runs to settle")
        after = database_now()
    finally:
        server.stop()
    (attempt,) = [r for r in read_records(path) if "at" in r]
    assert attempt["at"] - time.time() > SKEW - 10, "the worker's clock was not skewed"

    def on_database_clock(value: dt.datetime | None, what: str) -> None:
        assert value is not None, f"{what} is not set"
        assert before - dt.timedelta(seconds=1) <= value <= after + dt.timedelta(seconds=1), (
            f"{what} is {(value - after).total_seconds():+.1f} s after the database's now"
        )

    job = Job.objects.get(pk=done.pk)
    on_database_clock(job.started_at, "a completed job's started_at")
    on_database_clock(job.completed_at, "a completed job's completed_at")
    assert job.duration_seconds == pytest.approx(0.3, abs=0.2)

    retry = Job.objects.get(pk=retried.pk)
    on_database_clock(retry.failed_at, "a failed attempt's failed_at")
    on_database_clock(retry.started_at, "a failed attempt's started_at")
    assert retry.run_at - retry.failed_at == dt.timedelta(seconds=retry.retry_delay_seconds)

    wait = WorkflowExecution.objects.get(pk=wait_run.pk)
    on_database_clock(wait.started_at, "a run's started_at")
    on_database_clock(wait.resume_at - dt.timedelta(minutes=10), "a 10-minute wait's resume_at less 10 minutes")
    assert Job.objects.get(pk=wait.next_job_id).run_at == wait.resume_at

    step_retry = WorkflowExecution.objects.get(pk=retry_run.pk)
    (failed,) = ExecutionLog.objects.filter(execution=step_retry)
    delay = dt.timedelta(seconds=failed.response_data["retry_in_seconds"])
    on_database_clock(failed.started_at, "a failed step's log row")
    on_database_clock(step_retry.resume_at - delay, "a step retry's due time less its delay")
    assert Job.objects.get(pk=step_retry.next_job_id).run_at == step_retry.resume_at


def test_an_event_a_worker_two_minutes_fast_raises_before_a_waits_timeout_wins_the_wait(
    start_worker, libfaketime, settings
):
    """A step on that worker tags the contact 60 s before a wait_for_event's timeout (the database's clock):
    the event must win; stamped with the worker's clock it came "after" the timeout and was refused."""
    from contacts.infrastructure.models import Contact
    from tests.factories import AccountFactory, ContactFactory
    from tests.integration.workflows.support import make_workflow
    from workflows.application.runs.starting import start_run
    from workflows.infrastructure.models import WorkflowExecution

    account = AccountFactory()
    contact = ContactFactory(account=account)
    waits = make_workflow(
        account,
        [
            {
                "key": "wait_vip",
                "action_type": "wait_for_event",
                "config": {"event": "tag.added", "match": {"tag": "vip"}, "timeout": 90, "on_timeout": "late"},
                "next": "happened",
            },
            {"key": "happened", "action_type": "add_tag", "config": {"tag": "happened"}, "next": "$end"},
            {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
        ],
        name="waits for vip",
    )
    tags = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}], name="tags vip")
    worker = start_worker(
        JOB_POLL_INTERVAL="0.2", LD_PRELOAD=libfaketime, FAKETIME=f"+{SKEW:.0f}s", FAKETIME_DONT_FAKE_MONOTONIC="1"
    )
    worker.wait_for_output("started", timeout=30)
    run = start_run(workflow_id=waits.pk, contact_id=contact.pk).execution
    wait_until(lambda: WorkflowExecution.objects.filter(pk=run.pk, status="waiting").exists(), 30, "the wait")
    start_run(workflow_id=tags.pk, contact_id=contact.pk)
    wait_until(
        lambda: {"happened", "late"} & set(Contact.objects.get(pk=contact.pk).tags), 120, "the wait to end either way"
    )
    assert "happened" in Contact.objects.get(pk=contact.pk).tags, "the event was taken as later than the timeout"
