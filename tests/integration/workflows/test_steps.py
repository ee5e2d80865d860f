"""Carrying out steps: every action, consent, retries, pauses, cancels, stale jobs, and queries per step.

Jobs run in this thread through `run_due_jobs`, exactly as a worker runs them.
"""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from contacts.application.services import contact_delete, contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource
from contacts.infrastructure.models import Contact
from integrations.application import channels
from integrations.application.secrets import webhook_signing_secrets
from jobs.application.queue import enqueue
from jobs.infrastructure.models import Job
from tests.factories import ContactFactory
from tests.integration.workflows.support import end_wait_now, log_rows, make_due, make_workflow, run_due_jobs
from workflows.application.runs.operating import cancel_run, pause_run, resume_run, retry_run
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import IllegalExecutionTransition
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution, WorkflowVersion

# Running a job claims it, and a claim commits on its own: these tests commit too.
pytestmark = pytest.mark.django_db(transaction=True)
_TRANSACTION_CONTROL = re.compile(
    r"\s*(BEGIN( IMMEDIATE)?|COMMIT|ROLLBACK|SAVEPOINT \S+|RELEASE SAVEPOINT \S+)\s*;?\s*$", re.IGNORECASE
)


@pytest.fixture
def sent_webhooks(monkeypatch):
    """Records each WebhookRequest on its way to the real client (and the real server)."""
    requests = []
    real = channels.webhook_client

    class Recording:
        def send(self, request):
            requests.append(request)
            return real().send(request)

    monkeypatch.setattr(channels, "webhook_client", Recording)
    return requests


def start(workflow, contact, **kwargs) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk, **kwargs).execution


def test_five_steps_run_in_order(account, contact, webhook_server, sent_webhooks):
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "onboarding"}},
            {
                "action_type": "update_contact",
                "config": {
                    "fields": {"last_name": "{{ trigger.surname }}"},
                    "custom_fields": {"plan": "{{ trigger.plan }}"},
                },
            },
            {"action_type": "wait", "config": {"duration": 2}},
            {
                "action_type": "webhook",
                "config": {
                    "url": webhook_server.url + "/crm/{{ contact.id }}",
                    "headers": {"X-Plan": "{{ contact.custom_fields.plan }}"},
                },
            },
            {"action_type": "send_email", "config": {"subject": "Hi {{ contact.first_name }}", "text": "Welcome"}},
        ],
    )
    run = start(workflow, contact, trigger_data={"surname": "Byron", "plan": "pro"})
    assert run_due_jobs() == 3  # tag, update, wait
    run.refresh_from_db()
    assert run.status == "waiting"
    assert run.current_step_index == 3
    assert run.resume_at > timezone.now()
    make_due(run.next_job_id)
    assert run_due_jobs() == 1  # early (clocks differ): the run waits the rest
    run.refresh_from_db()
    assert run.status == "waiting"
    end_wait_now(run.pk)
    assert run_due_jobs() == 3  # end of wait, webhook, email
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.completed_at is not None
    assert log_rows(run) == [
        (0, "add_tag", 1, "succeeded"),
        (1, "update_contact", 1, "succeeded"),
        (2, "wait", 1, "succeeded"),
        (3, "webhook", 1, "succeeded"),
        (4, "send_email", 1, "succeeded"),
    ]
    contact.refresh_from_db()
    assert contact.tags == ["onboarding"]
    assert contact.last_name == "Byron"
    assert contact.custom_fields == {"plan": "pro"}
    (received,) = webhook_server.received
    assert received.path == f"/crm/{contact.pk}"
    assert received.headers["X-Plan"] == "pro"
    assert received.body["type"] == "workflow.step"  # no body configured: Relay's envelope
    assert received.body["contact"]["last_name"] == "Byron"
    assert sent_webhooks[0].message_id == f"run_{run.pk.hex}_step_3"
    assert sent_webhooks[0].account_id == account.pk
    assert run.context["steps"][3]["status_code"] == 200
    assert run.context["steps"][3]["json"] == {"ok": True}


def test_a_webhook_that_fails_twice_then_succeeds(account, contact, webhook_server, sent_webhooks):
    webhook_server.answers = [(503, {}, "down"), (502, {}, "down"), (200, {}, "{}")]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "queued"
    assert run.retry_count == 1
    assert run.last_error.startswith("ServerFailure: webhook http://127.0.0.1:")
    assert run.last_error.endswith("answered 503")
    assert run.last_error_category == "server_error"
    job = Job.objects.get(pk=run.next_job_id)
    assert 54 <= (job.run_at - timezone.now()).total_seconds() <= 60  # base 60 s, jitter 10 %
    assert run_due_jobs() == 0  # not due yet
    make_due(run.next_job_id)
    run_due_jobs()
    make_due(WorkflowExecution.objects.get(pk=run.pk).next_job_id)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [
        (0, "webhook", 1, "retrying"),
        (0, "webhook", 2, "retrying"),
        (0, "webhook", 3, "succeeded"),
    ]
    first = ExecutionLog.objects.filter(execution=run).order_by("id").first()
    assert first.error_category == "server_error"
    assert first.error_details.endswith("answered 503")
    assert 0 < first.response_data["retry_in_seconds"] <= 60
    assert first.response_data["status_code"] == 503  # what the receiver answered, kept with the attempt
    assert first.response_data["body"] == "down"
    assert len({r.message_id for r in sent_webhooks}) == 1  # one id for every attempt of the step


def test_a_permanent_error_fails_the_run_at_once(account, contact, webhook_server):
    webhook_server.answers = [(400, {}, "bad")]
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
    assert run.last_error_category == "validation"
    assert log_rows(run) == [(0, "webhook", 1, "failed")]
    data = ExecutionLog.objects.get(execution=run).response_data
    assert data["reason"] == "validation errors are not retried"
    assert data["status_code"] == 400
    assert data["body"] == "bad"
    contact.refresh_from_db()
    assert "never" not in contact.tags


def test_retry_after_is_honoured(account, contact, webhook_server):
    webhook_server.answers = [(429, {"Retry-After": "30"}, "slow down"), (200, {}, "")]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    before = timezone.now()
    run_due_jobs()
    run.refresh_from_db()
    job = Job.objects.get(pk=run.next_job_id)
    assert job.run_at >= before + timedelta(seconds=30)
    assert run.last_error_category == "rate_limit"


def test_attempts_run_out(account, contact, webhook_server):
    webhook_server.answers = [(500, {}, "")]
    workflow = make_workflow(
        account, [{"action_type": "webhook", "config": {"url": webhook_server.url, "max_attempts": 2}}]
    )
    run = start(workflow, contact)
    run_due_jobs()
    make_due(WorkflowExecution.objects.get(pk=run.pk).next_job_id)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert log_rows(run) == [(0, "webhook", 1, "retrying"), (0, "webhook", 2, "failed")]
    assert ExecutionLog.objects.filter(execution=run).last().response_data["reason"] == "gave up after 2 of 2 attempts"


def test_manual_retry_starts_again_from_the_failed_step(account, contact, webhook_server):
    webhook_server.answers = [(401, {}, ""), (200, {}, "")]
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "first"}},
            {"action_type": "webhook", "config": {"url": webhook_server.url}},
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.last_error_category == "auth"
    retry_run(execution_id=run.pk)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [
        (0, "add_tag", 1, "succeeded"),
        (1, "webhook", 1, "failed"),
        (1, "webhook", 1, "succeeded"),
    ]
    with pytest.raises(IllegalExecutionTransition) as info:
        retry_run(execution_id=run.pk)
    assert info.value.current == "completed"


def test_consent_skips_sending_steps_and_the_run_goes_on(account):
    contact = ContactFactory(account=account)
    contact_set_consent(
        contact_id=contact.pk, channel=ConsentChannel.EMAIL, opted_out=True, source=ConsentSource.UNSUBSCRIBE_LINK
    )
    contact_set_consent(
        contact_id=contact.pk, channel=ConsentChannel.SMS, opted_out=True, source=ConsentSource.INBOUND_SMS
    )
    workflow = make_workflow(
        account,
        [
            {"action_type": "send_email", "config": {"subject": "s", "text": "t"}},
            {"action_type": "send_sms", "config": {"body": "b"}},
            {"action_type": "send_voice", "config": {"message": "m"}},
            {"action_type": "add_tag", "config": {"tag": "after"}},
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert [entry[3] for entry in log_rows(run)] == ["skipped", "skipped", "skipped", "succeeded"]
    reasons = [e.response_data["skipped"] for e in ExecutionLog.objects.filter(execution=run).order_by("id")[:3]]
    assert reasons == [
        "the contact unsubscribed from email",
        "the contact opted out of SMS",
        "the contact opted out of calls",
    ]


def test_consent_is_checked_when_the_step_runs_not_when_the_run_starts(account, contact):
    workflow = make_workflow(account, [{"action_type": "send_email", "config": {"subject": "s", "text": "t"}}])
    run = start(workflow, contact)
    contact_set_consent(contact_id=contact.pk, channel=ConsentChannel.EMAIL, opted_out=True, source=ConsentSource.API)
    run_due_jobs()
    assert log_rows(run) == [(0, "send_email", 1, "skipped")]


def test_sending_steps_reach_the_channels(account, contact, caplog, mailoutbox):
    workflow = make_workflow(
        account,
        [
            {
                "action_type": "send_email",
                "config": {
                    "subject": "Hello\n{{ contact.first_name }}",
                    "text": "t",
                    "html": "<p>{{ contact.first_name }}</p>",
                },
            },
            {"action_type": "send_sms", "config": {"body": "Hi {{ contact.first_name }}"}},
            {"action_type": "send_voice", "config": {"recording_url": "https://cdn.example.com/a.mp3"}},
        ],
    )
    run = start(workflow, contact)
    with caplog.at_level("INFO", logger="relay.integrations"):
        run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    (email,) = mailoutbox
    assert email.to == [contact.email]
    assert email.subject == "Hello Ada"  # a subject is one line
    assert email.body.startswith("t")
    assert "<p>Ada</p>" in email.alternatives[0][0]
    assert f"sms to {contact.phone}: Hi Ada" in caplog.text
    data = [e.response_data for e in ExecutionLog.objects.filter(execution=run).order_by("id")]
    assert [d["channel"] for d in data] == ["email", "sms", "voice"]
    assert [d["provider"] for d in data] == ["locmem", "console", "console"]
    assert all(d["message_id"] for d in data)


def test_a_contact_without_address_is_skipped(account):
    contact = ContactFactory(account=account, email="", phone="")
    workflow = make_workflow(
        account,
        [
            {"action_type": "send_email", "config": {"subject": "s", "text": "t"}},
            {"action_type": "send_sms", "config": {"body": "b"}},
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    assert [entry[3] for entry in log_rows(run)] == ["skipped", "skipped"]


def test_a_failed_contact_update_leaves_no_half_write(account, contact):
    ContactFactory(account=account, email="taken@example.com")
    workflow = make_workflow(
        account,
        [
            {
                "action_type": "update_contact",
                "config": {"fields": {"first_name": "Changed", "email": "taken@example.com"}},
            }
        ],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.last_error == "ValidationFailure: email: another contact in this account has this email address"
    contact.refresh_from_db()
    assert contact.first_name == "Ada"  # the savepoint rolled the whole action back


def test_data_that_renders_badly_fails_the_step_permanently(account, contact):
    workflow = make_workflow(
        account,
        [
            {"action_type": "update_contact", "config": {"fields": {"email": "{{ trigger.email }}"}}},
            {"action_type": "add_tag", "config": {"tag": "{{ trigger.tag }}"}},
        ],
    )
    run = start(workflow, contact, trigger_data={"email": "not-an-email"})
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.last_error.startswith("ValidationFailure: email:")
    other = start(workflow, ContactFactory(account=account), trigger_data={"email": "ok@example.com"})
    run_due_jobs()
    other.refresh_from_db()
    assert other.status == "failed"
    assert other.last_error == "ValidationFailure: tag: must not be blank"


def test_a_huge_width_from_run_data_fails_the_step_at_once(account, contact):
    """A width only known when the step runs passes the save check; the render refuses it before allocating."""
    template = '{{ ""|ljust:trigger.width }}'
    workflow = make_workflow(
        account, [{"action_type": "update_contact", "config": {"fields": {"first_name": template}}}]
    )
    run = start(workflow, contact, trigger_data={"width": 300_000_000})
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.last_error_category == "validation"
    assert "ljust's width 300000000 is over the limit" in run.last_error
    assert ExecutionLog.objects.filter(execution=run).count() == 1  # permanent: not retried


def test_a_huge_template_smuggled_into_a_stored_version_fails_its_step_at_once(account, contact):
    """Validation bypassed (a manual edit of the row): published versions load without re-validation (they were
    checked when published), so the render's own limits stop it, before allocating, as a permanent failure."""
    workflow = make_workflow(account, [{"action_type": "update_contact", "config": {"fields": {"first_name": "Al"}}}])
    WorkflowVersion.objects.filter(pk=workflow.current_version_id).update(
        steps=[{"action_type": "update_contact", "config": {"fields": {"first_name": '{{ ""|ljust:"300000000" }}'}}}]
    )
    run = start(workflow, contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.last_error_category == "validation"
    assert "ljust's width 300000000 is over the limit" in run.last_error
    assert ExecutionLog.objects.filter(execution=run).count() == 1  # permanent: not retried
    contact.refresh_from_db()
    assert contact.first_name != ""


def test_a_stale_or_duplicate_step_job_does_nothing(account, contact):
    workflow = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "a"}}, {"action_type": "add_tag", "config": {"tag": "b"}}],
    )
    run = start(workflow, contact)
    duplicate = enqueue("workflow_step", {"execution_id": str(run.pk), "step_index": 0}, queue="workflows")

    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [(0, "add_tag", 1, "succeeded"), (1, "add_tag", 1, "succeeded")]
    assert Job.objects.get(pk=duplicate.id).status == "completed"  # ran, found nothing to do


def test_a_step_job_without_the_version_hint_takes_the_locked_path(account, contact, webhook_server):
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start(workflow, contact)
    Job.objects.filter(pk=run.next_job_id).update(payload={"execution_id": str(run.pk), "step_index": 0})
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [(0, "webhook", 1, "succeeded")]


def test_pause_cancels_the_queued_job_and_resume_queues_a_new_one(account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    run = start(workflow, contact)
    first_job = run.next_job_id
    run = pause_run(execution_id=run.pk)
    assert run.status == "paused"
    assert run.next_job_id is None
    assert Job.objects.get(pk=first_job).status == "cancelled"
    assert run_due_jobs() == 0
    run = resume_run(execution_id=run.pk)
    assert run.status == "queued"
    assert run.next_job_id not in (None, first_job)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"


def test_pause_during_a_wait_and_resume_after_it_passed(account, contact):
    workflow = make_workflow(
        account,
        [{"action_type": "wait", "config": {"duration": "1d"}}, {"action_type": "add_tag", "config": {"tag": "b"}}],
    )
    run = start(workflow, contact)
    run_due_jobs()
    wait_job = WorkflowExecution.objects.get(pk=run.pk).next_job_id
    run = pause_run(execution_id=run.pk)
    assert run.paused_from == "waiting"
    assert Job.objects.get(pk=wait_job).status == "cancelled"
    # Nothing happens at resume_at.
    WorkflowExecution.objects.filter(pk=run.pk).update(resume_at=timezone.now() - timedelta(seconds=1))
    assert run_due_jobs() == 0
    run = resume_run(execution_id=run.pk)
    assert run.status == "queued"  # the wait's time passed during the pause: go on at once
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"


def test_resume_before_the_wait_ends_waits_the_remainder(account, contact):
    workflow = make_workflow(
        account,
        [{"action_type": "wait", "config": {"duration": "1h"}}, {"action_type": "add_tag", "config": {"tag": "b"}}],
    )
    run = start(workflow, contact)
    run_due_jobs()
    run = pause_run(execution_id=run.pk)
    run = resume_run(execution_id=run.pk)
    assert run.status == "waiting"
    job = Job.objects.get(pk=run.next_job_id)
    assert job.handler == "workflow_resume"
    assert job.run_at == run.resume_at


def test_cancel_cancels_the_queued_job_and_no_step_runs(account, contact):
    workflow = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "a"}}, {"action_type": "add_tag", "config": {"tag": "b"}}],
    )
    run = start(workflow, contact)
    run_due_jobs(1)
    next_job = WorkflowExecution.objects.get(pk=run.pk).next_job_id
    run = cancel_run(execution_id=run.pk)
    assert run.status == "cancelled"
    assert run.completed_at is not None
    assert Job.objects.get(pk=next_job).status == "cancelled"
    # Even a job that escaped the cancel (claimed already) does nothing.
    Job.objects.filter(pk=next_job).update(status="pending")
    WorkflowExecution.objects.filter(pk=run.pk).update(next_job_id=next_job)
    run_due_jobs()
    assert log_rows(run) == [(0, "add_tag", 1, "succeeded")]
    contact.refresh_from_db()
    assert contact.tags == ["a"]
    with pytest.raises(IllegalExecutionTransition) as info:
        pause_run(execution_id=run.pk)
    assert info.value.current == "cancelled"


def test_a_run_keeps_its_version(account, contact):
    workflow = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "v1-a"}}, {"action_type": "add_tag", "config": {"tag": "v1-b"}}],
    )
    run = start(workflow, contact)
    run_due_jobs(1)
    WorkflowService().update(workflow_id=workflow.pk, steps=[{"action_type": "add_tag", "config": {"tag": "v2"}}])
    WorkflowService().publish(workflow_id=workflow.pk)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    contact.refresh_from_db()
    assert contact.tags == ["v1-a", "v1-b"]
    newer = start(workflow, ContactFactory(account=account))
    assert newer.version_id != run.version_id


def test_a_deleted_contact_takes_its_runs_and_their_queued_jobs(account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    run = start(workflow, contact)
    contact_delete(contact_id=contact.pk)
    assert not WorkflowExecution.objects.filter(pk=run.pk).exists()
    assert Job.objects.get(pk=run.next_job_id).status == "cancelled"
    assert run_due_jobs() == 0


def test_a_step_job_whose_run_is_gone_does_nothing(account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    start(workflow, contact)
    Contact.objects.filter(pk=contact.pk).delete()  # bypassing the service: no event, the job stays queued
    assert run_due_jobs() == 1  # the orphan job ran and did nothing


def test_queries_per_step_stay_few(account, contact, webhook_server):
    """A regression guard for the hot path; bench/workflow_throughput.py measures the speed itself.

    Counted: the statements that touch data, including the worker's claim; transaction control (BEGIN,
    COMMIT, savepoints) is left out, since SQLite's backend sends it as statements and PostgreSQL's does not.
    """
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "a"}},
            {"action_type": "update_contact", "config": {"custom_fields": {"n": 1}}},
            {"action_type": "webhook", "config": {"url": webhook_server.url}},
        ],
    )
    webhook_signing_secrets(account_id=account.pk)  # the account's signing secret exists, as it will in use
    run = start(workflow, contact)
    run_due_jobs(1)  # warms the version cache, as a running worker has it
    counts = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            run_due_jobs(1)
        counts.append(sum(1 for q in queries.captured_queries if not _TRANSACTION_CONTROL.match(q["sql"])))
    run.refresh_from_db()
    assert run.status == "completed"
    # update_contact: claim, lock the run (with its contact), the contacts service's read and update, the
    # event lookup, queue the next step, the run's move + its log row, complete the job.
    # webhook: claim, read the run (with its contact), mark it ACTIVE (compare-and-set), the webhook client's
    # read of the account's signing secret, lock the run, its move + log row, complete the job.
    # SQLite needs one more each: the move and the log row are two statements there; and update_contact one
    # more again, since SQLite has no notification listener to keep the trigger cache trusted, so its event reads
    # "does this account wait for events or have goals" each time (workflows.application.runs.goals).
    limits = (8, 7) if connection.vendor == "postgresql" else (10, 8)
    assert counts[0] <= limits[0], counts
    assert counts[1] <= limits[1], counts


def test_a_published_version_cannot_be_saved_again(account):
    from workflows.domain.errors import PublishedVersionImmutable

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    version = WorkflowVersion.objects.get(pk=workflow.current_version_id)
    version.steps = [{"action_type": "add_tag", "config": {"tag": "b"}}]
    with pytest.raises(PublishedVersionImmutable):
        version.save()
    assert WorkflowVersion.objects.get(pk=version.pk).steps[0]["config"] == {"tag": "a"}
