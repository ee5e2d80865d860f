"""The workflow's send steps go through the door (integrations.application.outbound): each message is a ledger
row naming its workflow, version, run, step and split path; the account's, the workflow's (read live) and the
step's rules decide; a window or a cap defers the step (the engine's deferred outcome), consent skips it; the
builder's test send is a `test` row. On PostgreSQL and SQLite, jobs run in this thread as a worker runs them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from integrations.application.sending_rules import sending_settings_set
from integrations.infrastructure.email import stable_message_id
from integrations.infrastructure.models import OutboundMessage
from jobs.infrastructure.models import Job
from tests.factories import ContactFactory
from tests.integration.workflows.support import log_rows, make_due, make_workflow, run_due_jobs
from workflows.application.previews import step_send_test
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"key": "welcome", "action_type": "send_email", "config": {"subject": "Hi", "text": "Hello"}}


def start(workflow, contact) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution


def closed_window() -> dict:
    """A window (UTC) that opens in about two hours, for an hour, every day."""
    opens = (timezone.now() + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    end = "24:00" if opens.hour == 23 else f"{opens.hour + 1:02d}:00"
    return {"days": ["mon-sun"], "hours": [f"{opens.hour:02d}:00-{end}"], "spread": 0}


def test_an_email_step_is_a_ledger_row_naming_its_workflow_version_run_step_and_split(account, mailoutbox):
    contact = ContactFactory(account=account, time_zone="UTC")
    workflow = make_workflow(
        account,
        [
            {
                "key": "ab",
                "action_type": "split",
                "config": {
                    "paths": [
                        {"name": "A", "weight": 50, "next": "welcome"},
                        {"name": "B", "weight": 50, "next": "welcome"},
                    ]
                },
            },
            EMAIL,
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    row = OutboundMessage.objects.get(run_id=run.pk)
    assert (row.status, row.channel, row.purpose, row.contact_id) == ("sent", "email", "marketing", contact.pk)
    path = ExecutionLog.objects.get(execution=run, step_key="ab").response_data["path"]
    assert (row.workflow_id, row.version_id, row.step_key, row.split_path) == (
        workflow.pk,
        run.version_id,
        "welcome",
        f"ab:{path}",
    )
    (email,) = mailoutbox
    assert email.extra_headers["Message-ID"] == row.provider_message_id
    assert row.provider_message_id == stable_message_id(row.idempotency_key, row.provider_message_id.split("@")[1][:-1])
    assert row.idempotency_key.startswith(f"run_{run.pk.hex}_step_")
    # The step keeps the delivery as before.
    data = ExecutionLog.objects.get(execution=run, step_key="welcome").response_data
    assert data["message_id"] == row.provider_message_id


def test_consent_skips_the_step_through_the_door_and_the_ledger_says_why(account, mailoutbox):
    contact = ContactFactory(account=account, unsubscribed=True)
    run = start(make_workflow(account, [EMAIL, {"action_type": "add_tag", "config": {"tag": "t"}}]), contact)
    run_due_jobs()
    assert [entry[3] for entry in log_rows(run)] == ["skipped", "succeeded"]
    assert mailoutbox == []
    row = OutboundMessage.objects.get(run_id=run.pk)
    assert (row.status, row.code) == ("refused", "unsubscribed")


def test_the_workflows_window_read_live_defers_the_step_and_it_goes_once_the_window_is_lifted(account):
    contact = ContactFactory(account=account, time_zone="UTC")
    sms = {"key": "text", "action_type": "send_sms", "config": {"body": "Hi"}}
    workflow = make_workflow(account, [sms])
    WorkflowService().update(workflow_id=workflow.pk, sending_rules={"send_window": closed_window()})
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "queued"
    assert [entry[3] for entry in log_rows(run)] == ["deferred"]
    row = OutboundMessage.objects.get(run_id=run.pk)
    assert (row.status, row.rule, row.provider_calls) == ("deferred", "send_window", 0)
    logged = ExecutionLog.objects.get(execution=run)
    assert logged.response_data["reason"] == row.reason
    # The marketer lifts the window (read live, not from the version): the step goes when its job comes.
    WorkflowService().update(workflow_id=workflow.pk, sending_rules={})
    make_due(Job.objects.filter(handler="workflow_step", status="pending").get().pk)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    row.refresh_from_db()
    assert (row.status, row.provider_calls) == ("sent", 1)
    assert [entry["status"] for entry in row.history] == ["deferred", "sending", "sent"]


def test_a_cap_across_a_workflows_steps_defers_the_second_message(account, mailoutbox):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 1, "hours": 24}])
    contact = ContactFactory(account=account, time_zone="UTC")
    second = {"key": "again", "action_type": "send_email", "config": {"subject": "Again", "text": "Hello again"}}
    run = start(make_workflow(account, [EMAIL, second]), contact)
    run_due_jobs()
    run.refresh_from_db()
    assert [entry[3] for entry in log_rows(run)] == ["succeeded", "deferred"]
    assert len(mailoutbox) == 1
    deferred = OutboundMessage.objects.get(run_id=run.pk, step_key="again")
    assert (deferred.status, deferred.rule) == ("deferred", "frequency_cap")
    assert deferred.deferred_until > timezone.now() + timedelta(hours=23)


def test_a_step_may_skip_instead_of_waiting_when_capped(account, mailoutbox):
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": 1, "hours": 24}])
    contact = ContactFactory(account=account)
    second = {
        "key": "again",
        "action_type": "send_email",
        "config": {"subject": "A", "text": "B", "when_capped": "skip"},
    }
    run = start(make_workflow(account, [EMAIL, second]), contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [entry[3] for entry in log_rows(run)] == ["succeeded", "skipped"]
    assert OutboundMessage.objects.get(run_id=run.pk, step_key="again").code == "over_cap"


def test_a_transactional_workflow_reaches_an_unsubscribed_contact(account, mailoutbox):
    contact = ContactFactory(account=account, unsubscribed=True)
    workflow = make_workflow(account, [EMAIL])
    WorkflowService().update(workflow_id=workflow.pk, sending_rules={"purpose": "transactional"})
    run = start(workflow, contact)
    run_due_jobs()
    assert [entry[3] for entry in log_rows(run)] == ["succeeded"]
    assert OutboundMessage.objects.get(run_id=run.pk).purpose == "transactional"


def test_the_builders_test_send_is_a_test_row_of_the_ledger_and_ignores_the_rules(account, mailoutbox):
    sending_settings_set(account_id=account.pk, send_windows={"email": closed_window()})
    workflow = make_workflow(account, [EMAIL])
    result = step_send_test(
        account_id=account.pk,
        action_type="send_email",
        config=EMAIL["config"],
        to="me@example.com",
        workflow={"id": workflow.pk, "name": workflow.name},
    )
    (email,) = mailoutbox
    assert email.to == ["me@example.com"]
    row = OutboundMessage.objects.get(purpose="test")
    assert (row.status, row.workflow_id, row.contact_id, row.address) == ("sent", workflow.pk, None, "me@example.com")
    assert result.message_id == row.provider_message_id
    assert row.idempotency_key.startswith("test_")
