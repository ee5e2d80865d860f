"""Runs carried out by real `runworker` processes, against real HTTP and SMTP servers on loopback."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from contacts.application.services import contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource
from contacts.infrastructure.models import Contact
from jobs.infrastructure.models import Job
from tests.factories import AccountFactory, ContactFactory
from tests.integration.integrations.servers import SmtpServer
from tests.integration.workflows.support import log_rows, make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.operating import cancel_run, pause_run, resume_run
from workflows.application.runs.starting import record_event, start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import ConcurrentExecutionLimitError
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WORKER_ENV = {"JOB_POLL_INTERVAL": "0.2", "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "INFO"}
TIMEOUT = 40


@pytest.fixture
def smtp_server():
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def worker(start_worker, smtp_server):
    return start_worker(EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}", **WORKER_ENV)


@pytest.fixture
def account():
    return AccountFactory()


@pytest.fixture
def contact(account):
    return ContactFactory(account=account, first_name="Ada")


def start(workflow, contact, **kwargs) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk, **kwargs).execution


def status_of(run) -> str:
    return WorkflowExecution.objects.values_list("status", flat=True).get(pk=run.pk)


def wait_for_status(run, *statuses: str, timeout: float = TIMEOUT) -> WorkflowExecution:
    wait_until(lambda: status_of(run) in statuses, timeout, f"run {run.pk} to be {' or '.join(statuses)}")
    return WorkflowExecution.objects.get(pk=run.pk)


def test_a_five_step_workflow_runs_to_completion(worker, account, contact, webhook_server, smtp_server):
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "onboarding"}},
            {"action_type": "update_contact", "config": {"custom_fields": {"plan": "{{ trigger.plan }}"}}},
            {"action_type": "wait", "config": {"duration": 2}},
            {
                "action_type": "webhook",
                "config": {
                    "url": webhook_server.url + "/crm",
                    "body": {"email": "{{ contact.email }}", "plan": "{{ contact.custom_fields.plan }}"},
                },
            },
            {
                "action_type": "send_email",
                "config": {"subject": "Welcome, {{ contact.first_name }}", "text": "Your plan: {{ custom.plan }}"},
            },
        ],
    )
    run = start(workflow, contact, trigger_data={"plan": "pro"})
    run = wait_for_status(run, "completed", "failed")
    assert run.status == "completed"
    assert log_rows(run) == [
        (0, "add_tag", 1, "succeeded"),
        (1, "update_contact", 1, "succeeded"),
        (2, "wait", 1, "succeeded"),
        (3, "webhook", 1, "succeeded"),
        (4, "send_email", 1, "succeeded"),
    ]
    entries = list(ExecutionLog.objects.filter(execution=run).order_by("id"))
    assert (entries[3].started_at - entries[2].started_at).total_seconds() >= 2  # the wait held it
    contact.refresh_from_db()
    assert contact.tags == ["onboarding"]
    assert contact.custom_fields == {"plan": "pro"}
    (received,) = webhook_server.received
    assert received.body == {"email": contact.email, "plan": "pro"}
    assert received.headers["webhook-id"] == f"run_{run.pk.hex}_step_3"
    message = smtp_server.parsed()
    assert message["Subject"] == "Welcome, Ada"
    assert "Your plan: pro" in message.get_body(preferencelist=("plain",)).get_content()


def test_a_webhook_failing_twice_then_answering_completes_with_three_attempts(worker, account, contact, webhook_server):
    webhook_server.answers = [(503, {}, "down"), (503, {}, "down"), (200, {}, "{}")]
    workflow = make_workflow(
        account, [{"action_type": "webhook", "config": {"url": webhook_server.url, "base_delay": 0.3}}]
    )
    run = wait_for_status(start(workflow, contact), "completed", "failed")
    assert run.status == "completed"
    assert log_rows(run) == [
        (0, "webhook", 1, "retrying"),
        (0, "webhook", 2, "retrying"),
        (0, "webhook", 3, "succeeded"),
    ]
    assert len({r.headers["webhook-id"] for r in webhook_server.received}) == 1  # one id for the step's attempts
    first = ExecutionLog.objects.filter(execution=run).order_by("id").first()
    assert first.error_category == "server_error"
    assert first.response_data["status_code"] == 503


def test_a_400_fails_the_run_at_once(worker, account, contact, webhook_server):
    webhook_server.answers = [(400, {}, '{"error": "bad"}')]
    workflow = make_workflow(
        account,
        [
            {"action_type": "webhook", "config": {"url": webhook_server.url, "base_delay": 0.2}},
            {"action_type": "add_tag", "config": {"tag": "never"}},
        ],
    )
    run = wait_for_status(start(workflow, contact), "completed", "failed")
    assert run.status == "failed"
    assert run.last_error_category == "validation"
    assert log_rows(run) == [(0, "webhook", 1, "failed")]
    time.sleep(1)
    assert len(webhook_server.received) == 1
    assert "never" not in Contact.objects.get(pk=contact.pk).tags


def test_a_429_is_retried_no_sooner_than_retry_after(worker, account, contact, webhook_server):
    webhook_server.answers = [(429, {"Retry-After": "2"}, ""), (200, {}, "")]
    workflow = make_workflow(
        account, [{"action_type": "webhook", "config": {"url": webhook_server.url, "base_delay": 0.1}}]
    )
    run = wait_for_status(start(workflow, contact), "completed", "failed")
    assert run.status == "completed"
    first, second = webhook_server.received
    assert second.at - first.at >= 2.0
    assert log_rows(run) == [(0, "webhook", 1, "retrying"), (0, "webhook", 2, "succeeded")]
    retrying = ExecutionLog.objects.filter(execution=run).order_by("id").first()
    assert retrying.error_category == "rate_limit"
    assert retrying.response_data["retry_in_seconds"] == 2


def test_a_run_paused_during_a_wait_does_nothing_until_resumed(worker, account, contact, webhook_server):
    workflow = make_workflow(
        account,
        [
            # Long enough that the pause lands during the wait even on a loaded machine.
            {"action_type": "wait", "config": {"duration": 5}},
            {"action_type": "webhook", "config": {"url": webhook_server.url}},
        ],
    )
    run = start(workflow, contact)
    waiting = wait_for_status(run, "waiting")
    pause_run(execution_id=run.pk)
    assert status_of(run) == "paused"
    # Let the wait's end pass (and the worker poll a few times) before looking for anything that ran.
    wait_until(lambda: timezone.now() > waiting.resume_at + timedelta(seconds=2), 30, "the wait's end to pass")
    assert status_of(run) == "paused"
    assert webhook_server.received == []
    assert log_rows(run) == [(0, "wait", 1, "succeeded")]
    resume_run(execution_id=run.pk)  # the wait's time passed during the pause: go on at once
    run = wait_for_status(run, "completed", "failed", timeout=15)
    assert run.status == "completed"
    assert len(webhook_server.received) == 1


def test_a_cancelled_run_never_runs_another_step(worker, account, contact, webhook_server):
    workflow = make_workflow(
        account,
        [
            # Long enough that the cancel lands during the wait even on a loaded machine.
            {"action_type": "wait", "config": {"duration": 5}},
            {"action_type": "webhook", "config": {"url": webhook_server.url}},
            {"action_type": "add_tag", "config": {"tag": "late"}},
        ],
    )
    run = start(workflow, contact)
    waiting = wait_for_status(run, "waiting")
    cancel_run(execution_id=run.pk)
    assert status_of(run) == "cancelled"
    assert Job.objects.get(pk=waiting.next_job_id).status == "cancelled"  # the wait's end will not come
    # Let the wait's end pass (and the worker poll a few times) before looking for anything that ran.
    wait_until(lambda: timezone.now() > waiting.resume_at + timedelta(seconds=2), 30, "the wait's end to pass")
    assert status_of(run) == "cancelled"
    assert webhook_server.received == []
    assert log_rows(run) == [(0, "wait", 1, "succeeded")]
    assert "late" not in Contact.objects.get(pk=contact.pk).tags


def test_the_run_after_the_limit_is_refused_and_nothing_is_stored(worker, account, webhook_server):
    account.max_concurrent_executions = 1
    account.save(update_fields=["max_concurrent_executions"])
    webhook_server.answers = [(500, {}, "")] * 2 + [(200, {}, "")]
    workflow = make_workflow(
        account, [{"action_type": "webhook", "config": {"url": webhook_server.url, "base_delay": 1}}]
    )
    first, second = ContactFactory.create_batch(2, account=account)
    running = start(workflow, first)
    wait_until(lambda: len(webhook_server.received) >= 1, TIMEOUT, "the first run's first attempt")
    assert status_of(running) in ("queued", "active")  # retrying: still counts toward the limit
    with pytest.raises(ConcurrentExecutionLimitError):
        start(workflow, second, idempotency_key="second")
    assert WorkflowExecution.objects.count() == 1
    assert not WorkflowExecution.objects.filter(idempotency_key="second").exists()
    wait_for_status(running, "completed", "failed")
    later = start(workflow, second)  # room again once the first run ended
    assert wait_for_status(later, "completed", "failed").status == "completed"


def test_a_run_started_before_an_edit_finishes_on_its_old_version(worker, account, contact, webhook_server):
    workflow = make_workflow(
        account,
        [
            {"action_type": "wait", "config": {"duration": 5}},
            {"action_type": "webhook", "config": {"url": webhook_server.url, "body": {"version": "one"}}},
        ],
    )
    old = start(workflow, contact)
    wait_for_status(old, "waiting")
    service = WorkflowService()
    service.update(
        workflow_id=workflow.pk,
        steps=[{"action_type": "webhook", "config": {"url": webhook_server.url, "body": {"version": "two"}}}],
    )
    service.publish(workflow_id=workflow.pk)
    assert status_of(old) == "waiting"  # the edit landed while the old run was in flight, or this proves nothing
    new = start(workflow, ContactFactory(account=account))
    assert wait_for_status(old, "completed", "failed").status == "completed"
    assert wait_for_status(new, "completed", "failed").status == "completed"
    bodies = sorted(r.body["version"] for r in webhook_server.received)
    assert bodies == ["one", "two"]
    assert log_rows(old) == [(0, "wait", 1, "succeeded"), (1, "webhook", 1, "succeeded")]
    assert log_rows(new) == [(0, "webhook", 1, "succeeded")]


def test_an_unsubscribed_contacts_email_is_skipped_and_the_run_completes(worker, account, contact, smtp_server):
    contact_set_consent(
        contact_id=contact.pk, channel=ConsentChannel.EMAIL, opted_out=True, source=ConsentSource.UNSUBSCRIBE_LINK
    )
    workflow = make_workflow(
        account,
        [
            {"action_type": "send_email", "config": {"subject": "Offer", "text": "Buy"}},
            {"action_type": "add_tag", "config": {"tag": "after-email"}},
        ],
    )
    run = wait_for_status(start(workflow, contact), "completed", "failed")
    assert run.status == "completed"
    assert log_rows(run) == [(0, "send_email", 1, "skipped"), (1, "add_tag", 1, "succeeded")]
    assert smtp_server.messages == []
    assert "after-email" in Contact.objects.get(pk=contact.pk).tags


def test_the_same_idempotency_key_twice_gives_one_run(worker, account, contact, webhook_server):
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    first = start(workflow, contact, idempotency_key="order-42")
    second = start(workflow, contact, idempotency_key="order-42")
    assert first.pk == second.pk
    wait_for_status(first, "completed", "failed")
    time.sleep(0.5)
    assert WorkflowExecution.objects.count() == 1
    assert len(webhook_server.received) == 1


def test_an_event_chain_runs_across_workers(start_worker, account, contact, webhook_server):
    """Two workers; workflow A tags the contact, which starts workflow B through the tag.added event."""
    for _ in range(2):
        start_worker(**WORKER_ENV)
    make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "qualified"}}],
        trigger={"type": "event", "event": "lead.created"},
        name="A",
    )
    b = make_workflow(
        account,
        [{"action_type": "webhook", "config": {"url": webhook_server.url, "body": {"tag": "{{ trigger.tag }}"}}}],
        trigger={"type": "event", "event": "tag.added", "tag": "qualified"},
        name="B",
    )
    outcome = record_event(account=account, contact=contact, name="lead.created", data={})
    (a_run,) = outcome.started
    wait_for_status(a_run, "completed", "failed")
    b_run = wait_until(lambda: WorkflowExecution.objects.filter(workflow=b).first(), TIMEOUT, "workflow B's run")
    assert wait_for_status(b_run, "completed", "failed").status == "completed"
    assert b_run.parent_id == a_run.pk
    assert b_run.depth == 1
    assert webhook_server.received[0].body == {"tag": "qualified"}
    assert timezone.now() - b_run.created_at < timedelta(minutes=1)


def test_a_worker_sees_a_workflow_published_or_paused_while_it_runs(start_worker, account, webhook_server):
    """Workers remember which workflows an event starts; publishing and pausing must reach them at once."""
    # Answers never expire here, so only the notification can make the worker see the new workflow.
    start_worker(**WORKER_ENV, WORKFLOW_TRIGGER_CACHE_MAX_AGE="3600")
    first, third = (ContactFactory(account=account) for _ in range(2))
    tagger = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}], name="Tagger")
    wait_for_status(start(tagger, first), "completed")  # the worker now knows: tag.added vip starts nothing

    follower = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "welcomed"}}],
        trigger={"type": "event", "event": "tag.added", "tag": "vip"},
        name="Follower",
    )

    # The publish reaches the worker by a notification on its listener connection; a step claimed in the
    # instant before it arrives may still use the old answer. Tag contacts one by one until a run starts.
    def tag_next_until_followed() -> WorkflowExecution | None:
        tagged = ContactFactory.create(account=account)
        wait_for_status(start(tagger, tagged), "completed")
        # The follower's run is created in the tag step's transaction: it exists once the tagger completed.
        return WorkflowExecution.objects.filter(workflow=follower, contact=tagged).first()

    followed = wait_until(tag_next_until_followed, TIMEOUT, "the newly published workflow to start")
    wait_for_status(followed, "completed")
    assert "welcomed" in Contact.objects.get(pk=followed.contact_id).tags

    WorkflowService().pause(workflow_id=follower.pk)
    wait_for_status(start(tagger, third), "completed")
    # Deterministic: the run would have been created in the tag step's transaction, and starting re-checks
    # the workflow's status under the account lock whatever the worker's cache says.
    assert not WorkflowExecution.objects.filter(workflow=follower, contact=third).exists()
