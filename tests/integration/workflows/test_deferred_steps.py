"""A deferred step on both databases: the send window is closed, so the run waits, QUEUED with its step's job due
when the window opens; logged with the outcome "deferred" and the rule's reason; not an attempt, not a visit;
then sent at the opening. Goals, cancels and pauses reach a deferred run. Statistics count deferrals apart.

The SMS step goes through the door (the sending rules on the contact's clock, the ledger); jobs run in this
thread through `run_due_jobs`, exactly as a worker runs them.
"""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from contacts.application.services import contact_add_tag
from integrations.application.sending_rules import sending_settings_set
from integrations.infrastructure.models import OutboundMessage
from jobs.infrastructure.models import Job
from tests.integration.workflows.support import log_rows, make_due, make_workflow, run_due_jobs
from workflows.application.runs.operating import cancel_run, pause_run, resume_run
from workflows.application.runs.starting import start_run
from workflows.application.selectors import run_timeline
from workflows.application.stats import workflow_step_counts
from workflows.application.workflows import WorkflowService
from workflows.domain.execution import run_path
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

PARIS = ZoneInfo("Europe/Paris")
STEPS = [
    {"key": "hello", "name": "Hello", "action_type": "send_sms", "config": {"body": "Hi {{ contact.first_name }}"}},
    {"key": "after", "action_type": "add_tag", "config": {"tag": "after"}},
]
BOUGHT = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}


def closed_window(now: datetime) -> tuple[dict, datetime]:
    """An SMS window that is closed now on Paris's clock and opens in 1 to 2 hours, every day; and its opening."""
    local = now.astimezone(PARIS)
    opens = (local + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    end = "24:00" if opens.hour == 23 else f"{opens.hour + 1:02d}:00"
    return {"days": ["mon-sun"], "hours": [f"{opens.hour:02d}:00-{end}"], "spread": 0}, opens


def sms_ledger(run) -> list[str]:
    """The statuses of the run's SMS in the ledger (one row per message: its key is the step's visit)."""
    return list(OutboundMessage.objects.filter(run_id=run.pk).order_by("id").values_list("status", flat=True))


@pytest.fixture
def paris_contact(contact):
    contact.time_zone = "Europe/Paris"
    contact.save()
    return contact


def deferred_run(account, contact, goals=()):
    window, opens = closed_window(timezone.now())
    sending_settings_set(account_id=account.pk, send_windows={"sms": window})
    if goals:
        service = WorkflowService()
        workflow = service.create(account_id=account.pk, name="Hello", steps=STEPS, goals=list(goals))
        service.publish(workflow_id=workflow.pk)
    else:
        workflow = make_workflow(account, STEPS)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    return workflow, run, opens


def open_the_window(account) -> None:
    sending_settings_set(account_id=account.pk, send_windows={"sms": None})


def test_a_closed_window_defers_the_step_and_the_run_waits_for_its_opening(account, paris_contact):
    workflow, run, opens = deferred_run(account, paris_contact)

    assert (run.status, run.current_step_key, run.retry_count) == ("queued", "hello", 0)
    assert run.resume_at == opens
    job = Job.objects.get(pk=run.next_job_id)
    assert (job.handler, job.status, job.run_at) == ("workflow_step", "pending", opens)  # due at the opening
    (row,) = ExecutionLog.objects.filter(execution=run)
    assert (row.step_key, row.attempt_number, row.outcome) == ("hello", 1, "deferred")
    assert row.response_data["rule"] == "send_window"
    assert datetime.fromisoformat(row.response_data["deferred_until"]) == opens
    when = f"{opens:%d %b %H:%M}"
    assert row.response_data["reason"].startswith("waiting for the send window (opens ")
    assert row.response_data["reason"].endswith(f"{when} Europe/Paris)")  # on the contact's clock
    # Not a visit: the path has not grown past the step, nothing was added to what later steps read.
    assert run_path(run.context, run.current_step_index, run.step_count, run.current_step_key) == ["hello"]
    assert run.context["steps"] == []

    timeline = run_timeline(execution=run)
    assert [(s.key, s.state) for s in timeline] == [("hello", "deferred"), ("after", "to come")]
    assert timeline[0].deferred == row.response_data["reason"]

    assert sms_ledger(run) == ["deferred"]  # the door's row: held back, not sent
    run_due_jobs()  # nothing is due before the opening
    assert len(log_rows(run)) == 1

    open_the_window(account)  # the opening comes (its job made due): the step is asked again, and sends
    make_due(run.next_job_id)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [
        (0, "send_sms", 1, "deferred"),
        (0, "send_sms", 1, "succeeded"),  # the same attempt number: the deferral was not an attempt
        (1, "add_tag", 1, "succeeded"),
    ]
    assert run_path(run.context, run.current_step_index, run.step_count, run.current_step_key) == ["hello", "after"]
    assert sms_ledger(run) == ["sent"]  # the same message (its key), now gone
    (hello, after) = workflow_step_counts(workflow_id=workflow.pk, since=timezone.now() - timedelta(hours=1))
    assert (hello.passed, hello.deferred, hello.retried, hello.failed) == (1, 1, 0, 0)
    assert (after.passed, after.deferred) == (1, 0)


def test_deferrals_never_use_up_a_steps_attempts(account, paris_contact):
    """A step of one attempt, deferred three times, still sends: deferrals are not attempts."""
    steps = [{**STEPS[0], "config": {**STEPS[0]["config"], "max_attempts": 1}}]
    window, _opens = closed_window(timezone.now())
    sending_settings_set(account_id=account.pk, send_windows={"sms": window})
    run = start_run(workflow_id=make_workflow(account, steps).pk, contact_id=paris_contact.pk).execution
    for _ in range(3):
        run_due_jobs()
        run.refresh_from_db()
        make_due(run.next_job_id)
    open_the_window(account)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [(0, "send_sms", 1, "deferred")] * 3 + [(0, "send_sms", 1, "succeeded")]


def test_a_goal_met_ends_a_deferred_run_and_its_step_never_sends(account, paris_contact):
    _workflow, run, _opens = deferred_run(account, paris_contact, goals=[BOUGHT])
    assert run.status == "queued"
    waiting = run.next_job_id
    contact_add_tag(contact_id=paris_contact.pk, tag="customer")
    run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.end_reason) == ("completed", "goal met: Bought")
    assert Job.objects.get(pk=waiting).status == "cancelled"  # the step's job due at the opening
    open_the_window(account)
    run_due_jobs()
    assert [row[3] for row in log_rows(run)] == ["deferred", "skipped"]  # the goal's row, at the deferred step
    assert sms_ledger(run) == ["deferred"]  # never sent


def test_cancelling_a_deferred_run_cancels_its_job(account, paris_contact):
    _workflow, run, _opens = deferred_run(account, paris_contact)
    waiting = run.next_job_id
    run = cancel_run(execution_id=run.pk)
    assert run.status == "cancelled"
    assert Job.objects.get(pk=waiting).status == "cancelled"
    open_the_window(account)
    make_due(waiting)
    Job.objects.filter(pk=waiting).update(status="pending")  # even one that escaped the cancel does nothing
    run_due_jobs()
    assert [row[3] for row in log_rows(run)] == ["deferred"]
    assert sms_ledger(run) == ["deferred"]  # never sent


def test_a_paused_deferred_run_resumes_to_wait_for_the_same_opening(account, paris_contact):
    _workflow, run, opens = deferred_run(account, paris_contact)
    waiting = run.next_job_id
    pause_run(execution_id=run.pk)
    assert Job.objects.get(pk=waiting).status == "cancelled"
    run = resume_run(execution_id=run.pk)
    run = WorkflowExecution.objects.get(pk=run.pk)
    assert (run.status, run.resume_at) == ("queued", opens)
    assert Job.objects.get(pk=run.next_job_id).run_at == opens  # a new job, due at the same opening


def test_the_runs_page_and_the_statistics_say_it_in_plain_words(client, superuser, account, paris_contact):
    workflow, run, _opens = deferred_run(account, paris_contact)
    reason = ExecutionLog.objects.get(execution=run).response_data["reason"]
    client.force_login(superuser)
    page = client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).content.decode()
    assert f'<div data-testid="run-deferred"><span class="k">Deferred</span>{reason[0].upper()}{reason[1:]}' in page
    assert f'<span data-testid="step-deferred">{reason}</span>' in page
    assert 'data-step-state="deferred"' in page
    assert "location.reload" not in page  # a deferred run may wait for hours: the page does not poll
    assert "Retrying" not in page
    stats = client.get(reverse("admin:workflows_workflow_stats", args=[workflow.pk])).content.decode()
    assert '<td data-testid="step-deferred">1</td>' in stats


def test_the_contacts_page_lists_its_sends_waiting_in_plain_words(client, superuser, account, paris_contact):
    """The run's deferred step (with its workflow), and an email job the door deferred (from the ledger)."""
    from jobs.application.queue import enqueue
    from jobs.application.worker import Worker

    _workflow, run, _opens = deferred_run(account, paris_contact)
    window, _email_opens = closed_window(timezone.now())
    sending_settings_set(account_id=account.pk, send_windows={"sms": window, "email": window})
    job = enqueue("send_email", {"to": paris_contact.email, "subject": "Receipt", "text": "T", "account": account.pk})
    assert Worker(burst=True, concurrency=1, install_signal_handlers=False).run() == 0
    assert Job.objects.get(pk=job.pk).snoozes == 1

    reason = ExecutionLog.objects.get(execution=run).response_data["reason"]
    client.force_login(superuser)
    page = client.get(reverse("admin:contacts_contact_change", args=[paris_contact.pk])).content.decode()
    assert '<div class="module" data-testid="contact-deferred"><h2>Sends waiting</h2>' in page
    sentence = f"{reason[0].upper()}{reason[1:]}"
    assert f"<td>SMS “Hello”</td><td>{sentence}</td>" in page
    run_link = reverse("admin:workflows_workflowexecution_change", args=[run.pk])
    assert f'<a href="{run_link}">Test workflow</a>' in page
    assert f"<td>Email</td><td>{sentence}</td>" in page  # the job's email, waiting for the same opening
    assert "a queued email" in page
