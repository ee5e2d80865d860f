"""A step's outcome the database cannot store, and step jobs that die, never strand a run.

A receiver's answer is data we do not control: PostgreSQL's jsonb refuses NUL and lone surrogates,
and a database error's DETAIL quotes the row it refused. Whatever happens, the run ends in a state an
operator can act on (never QUEUED/ACTIVE forever) and no stored error holds the answer's data.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.db import connection

from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.worker import Worker
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job
from jobs.infrastructure.store import get_store
from tests.factories import ContactFactory
from tests.integration.workflows.support import TEST_WORKER, log_rows, make_workflow, run_due_jobs
from workflows.application.runs.operating import job_died, reconcile_stranded
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

NUL_BODY = '{"id": "a\\u0000b", "note": "\\ud800x", "k\\u0000": 1}'  # JSON escapes, as a receiver may send them
SECRET = "SECRET-BODY-7f3a"


def start(workflow, contact) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution


def stored_errors(run: WorkflowExecution) -> list[str]:
    """Every error text the run left behind: the run's, its log rows', and its jobs'."""
    run.refresh_from_db()
    texts = [run.last_error]
    texts += list(ExecutionLog.objects.filter(execution=run).values_list("error_details", flat=True))
    texts += [str(d) for d in ExecutionLog.objects.filter(execution=run).values_list("response_data", flat=True)]
    texts += list(Job.objects.filter(payload__execution_id=str(run.pk)).values_list("error_message", flat=True))
    return texts


def test_an_answer_with_nul_and_lone_surrogates_is_kept_cleaned(account, contact, webhook_server):
    webhook_server.answers = [(200, {}, NUL_BODY)]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    data = ExecutionLog.objects.get(execution=run).response_data
    assert data["json"] == {"id": "a\ufffdb", "note": "\ufffdx", "k\ufffd": 1}
    assert run.context["steps"][0]["json"]["id"] == "a\ufffdb"  # what later steps' templates see
    assert Job.objects.filter(status="completed").count() == 1


def test_an_answer_with_numbers_that_are_not_finite_is_kept_as_text(account, contact, webhook_server):
    """jsonb refuses NaN and Infinity, and Python reads 1e400 as infinity: such a number is kept spelled out."""
    webhook_server.answers = [(200, {}, '{"big": 1e400, "low": -1e400, "nan": NaN, "ok": 1.5}')]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    expected = {"big": "inf", "low": "-inf", "nan": "nan", "ok": 1.5}
    assert ExecutionLog.objects.get(execution=run).response_data["json"] == expected
    assert run.context["steps"][0]["json"] == expected


def test_a_failing_answer_with_nul_fails_the_run_cleanly(account, contact, webhook_server):
    webhook_server.answers = [(400, {}, "bad\x00input \\u0000")]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert ExecutionLog.objects.get(execution=run).response_data["body"] == "bad\ufffdinput \\u0000"


@pytest.mark.postgres
def test_an_outcome_the_database_refuses_fails_the_step_without_its_data(
    account, contact, webhook_server, log_rows_refused_when_secret
):
    webhook_server.answers = [(200, {}, f'{{"note": "{SECRET}"}}')]
    workflow = make_workflow(
        account,
        [
            {"action_type": "webhook", "config": {"url": webhook_server.url}},
            {"action_type": "add_tag", "config": {"tag": "never"}},
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.next_job_id is None
    assert run.last_error.startswith("OutcomeNotStored: ")
    assert log_rows(run) == [(0, "webhook", 1, "failed")]
    assert Job.objects.get().status == "completed"  # the step job did its part: the run is settled
    assert not any(SECRET in text for text in stored_errors(run))
    assert SECRET not in str(run.context)


@pytest.fixture
def runs_refuse_to_start() -> Iterator[None]:
    """A real database failure on every attempt to carry a step out: a run row may only become failed."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            CREATE FUNCTION relay_test_refuse_run() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.status <> 'failed' THEN
                    RAISE EXCEPTION 'run refused' USING DETAIL = 'Failing row contains {SECRET}';
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER relay_test_refuse_run BEFORE UPDATE ON workflows_workflowexecution
                FOR EACH ROW EXECUTE FUNCTION relay_test_refuse_run();
            """
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER relay_test_refuse_run ON workflows_workflowexecution")
            cursor.execute("DROP FUNCTION relay_test_refuse_run()")


def run_worker_until_idle() -> None:
    worker = Worker(concurrency=1, burst=True, install_signal_handlers=False)
    assert worker.run() == 0


@pytest.mark.postgres
@pytest.mark.parametrize("action", ["webhook", "add_tag"])
def test_a_step_job_that_dies_fails_its_run(settings, account, contact, webhook_server, runs_refuse_to_start, action):
    settings.JOB_MAX_RETRIES = 1  # two attempts, then dead
    settings.JOB_RETRY_DELAY_SECONDS = 0.01
    config = {"url": webhook_server.url} if action == "webhook" else {"tag": "vip"}
    workflow = make_workflow(account, [{"action_type": action, "config": config}])
    run = start(workflow, contact)
    job_id = run.next_job_id
    deadline = time.monotonic() + 20
    while Job.objects.get(pk=job_id).status != "dead" and time.monotonic() < deadline:
        run_worker_until_idle()
        time.sleep(0.05)
    job = Job.objects.get(pk=job_id)
    assert job.status == "dead"
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.next_job_id is None
    assert run.last_error.startswith(f"StepJobDied: the workflow_step job {job_id} ended dead")
    assert job.error_message == "ProgrammingError: run refused"  # the first line only: no DETAIL
    assert not any(SECRET in text for text in stored_errors(run))
    assert webhook_server.received == []


def test_a_step_job_whose_lease_passed_on_its_last_attempt_fails_its_run(settings, account, contact):
    settings.JOB_MAX_RETRIES = 0
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    run = start(workflow, contact)
    store = get_store()
    [claimed] = store.claim(TEST_WORKER, None, 1, 60)  # the worker that claimed it dies without a word
    assert claimed.id == run.next_job_id
    Job.objects.filter(pk=claimed.id).update(lease_expires_at="2000-01-01T00:00:00Z")
    LeaseRescue(using=queue_database()).rescue_expired(store)
    assert Job.objects.get(pk=claimed.id).status == "dead"
    run.refresh_from_db()
    assert run.status == "failed"
    assert "ended dead" in run.last_error
    assert "LeaseExpired" in run.last_error


def test_a_dead_letter_for_a_job_that_no_longer_holds_the_run_changes_nothing(account, contact):
    """A stale or duplicate step job dying says nothing about the run, which has moved on."""
    import uuid

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    run = start(workflow, contact)
    failed = job_died(
        execution_id=run.pk, job_id=uuid.uuid4(), handler="workflow_step", status="dead", error="Boom: stale"
    )
    assert failed is False
    run.refresh_from_db()
    assert run.status == "queued"
    assert run.last_error == ""
    assert run_due_jobs() == 1
    run.refresh_from_db()
    assert run.status == "completed"


@pytest.mark.postgres
def test_a_dead_letter_waits_for_a_locked_run_only_so_long(account, contact, monkeypatch):
    """The hook runs on an executor or the maintenance thread: a long lock holder must not stall them."""
    import threading

    import psycopg

    from workflows.application.runs import operating

    monkeypatch.setattr(operating, "JOB_DIED_LOCK_WAIT_SECONDS", 0.5)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    run = start(workflow, contact)
    params = {k: v for k, v in connection.get_connection_params().items() if k in ("dbname", "user", "host", "port")}
    outcome: list[object] = []

    def settle() -> None:
        try:
            outcome.append(
                job_died(execution_id=run.pk, job_id=run.next_job_id, handler="workflow_step", status="dead", error="x")
            )
        except Exception as exc:
            outcome.append(exc)
        finally:
            connection.close()

    with psycopg.connect(**params) as holder:
        holder.execute("SELECT 1 FROM workflows_workflowexecution WHERE id = %s FOR UPDATE", [run.pk])
        started = time.monotonic()
        thread = threading.Thread(target=settle)
        thread.start()
        thread.join(10)
        waited = time.monotonic() - started
        holder.rollback()
    assert len(outcome) == 1
    assert "lock timeout" in str(outcome[0])
    assert waited < 5


@pytest.mark.parametrize("job_end", ["dead", "failed", "cancelled", "purged"])
def test_the_sweep_fails_runs_whose_job_will_never_run(account, contact, job_end):
    """What the dead-letter hook did not settle: the hook failed, an operator cancelled the job, a purge."""
    from datetime import timedelta

    from django.utils import timezone

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    stranded = start(workflow, contact)
    healthy = start(workflow, ContactFactory(account=account))
    if job_end == "purged":
        Job.objects.filter(pk=stranded.next_job_id).delete()
    else:
        Job.objects.filter(pk=stranded.next_job_id).update(status=job_end, error_message="Boom: it broke")
    long_ago = timezone.now() - timedelta(minutes=10)
    WorkflowExecution.objects.filter(pk__in=[stranded.pk, healthy.pk]).update(updated_at=long_ago)
    assert reconcile_stranded(grace_seconds=300) == 1
    stranded.refresh_from_db()
    healthy.refresh_from_db()
    assert stranded.status == "failed"
    assert "StepJobDied" in stranded.last_error
    assert healthy.status == "queued"  # its job is pending: it will run
    assert reconcile_stranded(grace_seconds=300) == 0  # settled once


def test_the_sweep_leaves_a_run_changed_within_its_grace_alone(account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    run = start(workflow, contact)
    Job.objects.filter(pk=run.next_job_id).update(status="dead")
    assert reconcile_stranded(grace_seconds=300) == 0
    run.refresh_from_db()
    assert run.status == "queued"


def test_the_sweep_is_a_builtin_schedule():
    from jobs.application.schedules import sync_schedules
    from jobs.infrastructure.models import Schedule

    sync_schedules()
    assert Schedule.objects.get(name="relay.reconcile_runs").handler == "workflows.reconcile"


def test_the_sweep_finds_a_stranded_run_behind_many_newer_given_up_jobs(account, contact):
    """Cancelled jobs pile up (every pause leaves one): they must not hide an older stranded run."""
    import uuid
    from datetime import timedelta

    from django.utils import timezone

    from jobs.application.queue import enqueue

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    stranded = start(workflow, contact)
    Job.objects.filter(pk=stranded.next_job_id).update(status="dead")
    WorkflowExecution.objects.filter(pk=stranded.pk).update(updated_at=timezone.now() - timedelta(minutes=10))
    newer = [enqueue("workflow_step", {"execution_id": str(uuid.uuid4()), "step_index": 0}).id for _ in range(30)]
    Job.objects.filter(pk__in=newer).update(status="cancelled")
    assert reconcile_stranded(grace_seconds=300, limit=5) == 1
    stranded.refresh_from_db()
    assert stranded.status == "failed"


def test_a_job_retried_by_an_operator_meanwhile_keeps_its_run(account, contact):
    """The sweep read the job as dead; an operator retried it before the sweep took the run's lock."""
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}])
    run = start(workflow, contact)  # its job is pending again, as after job_retry
    failed = job_died(execution_id=run.pk, job_id=run.next_job_id, handler="workflow_step", status="dead", error="Boom")
    assert failed is False
    run.refresh_from_db()
    assert run.status == "queued"
