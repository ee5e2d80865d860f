"""Email engagement end to end, with real `runworker` processes on PostgreSQL: an email over real SMTP
(aiosmtpd), a real HTTP click on its tracked link, a wait for that click that wakes its run, a branch on it,
a wait that times out, and a goal that ends a run in a long wait."""

import html as html_lib
import re

import pytest
import requests

from contacts.application.services import contact_add_tag
from tests.factories import AccountFactory, ContactFactory
from tests.integration.integrations.servers import SmtpServer
from tests.integration.workflows.support import click_flow, make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.execution import run_path
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def path_of(run) -> list[str]:
    """The keys of the steps the run went through (what the API's `path` shows)."""
    return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


TIMEOUT = 40
SALE = "https://shop.example/sale?x=1&y=2"


@pytest.fixture
def smtp_server():
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def workers(start_worker, smtp_server, live_server, settings):
    settings.RELAY_PUBLIC_URL = live_server.url  # the click is served by this process, the email sent by workers
    env = {
        "EMAIL_URL": f"smtp://127.0.0.1:{smtp_server.port}",
        "RELAY_PUBLIC_URL": live_server.url,
        "SECRET_KEY": settings.SECRET_KEY,  # the workers sign the links this process checks
        "JOB_POLL_INTERVAL": "0.5",
        "LOG_LEVEL": "INFO",
    }
    return [start_worker(**env), start_worker(**env)]


@pytest.fixture
def contact():
    return ContactFactory(account=AccountFactory(), first_name="Ada")


def run_of(workflow, contact) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution


def finished(run) -> WorkflowExecution:
    wait_until(
        lambda: WorkflowExecution.objects.filter(pk=run.pk, status="completed").exists(), TIMEOUT, "the run to end"
    )
    run.refresh_from_db()
    return run


def decisions(run) -> list[str]:
    rows = ExecutionLog.objects.filter(execution=run).order_by("id").values_list("decision", flat=True)
    return [d["kind"] for d in rows if d]


def test_a_real_click_wakes_the_wait_and_the_branch_tags_the_contact_engaged(workers, smtp_server, contact):
    run = run_of(make_workflow(contact.account, click_flow(120)), contact)
    wait_until(lambda: smtp_server.messages, TIMEOUT, "the email")
    wait_until(
        lambda: WorkflowExecution.objects.filter(pk=run.pk, status="waiting").exists(), TIMEOUT, "the run to wait"
    )
    html = smtp_server.parsed().get_body(("html",)).get_content()
    (click,) = [html_lib.unescape(u) for u in re.findall(r'href="([^"]+)"', html) if "/t/c/" in u]
    answer = requests.get(click, allow_redirects=False, timeout=10)
    assert (answer.status_code, answer.headers["Location"]) == (302, SALE)
    run = finished(run)
    assert path_of(run) == ["welcome", "wait_click", "decide", "tag_engaged"]
    assert decisions(run) == ["event", "branch"]
    contact.refresh_from_db()
    assert "engaged" in contact.tags
    assert len(smtp_server.messages) == 1  # no reminder


def test_without_a_click_the_wait_times_out_and_the_reminder_goes(workers, smtp_server, contact):
    run = run_of(make_workflow(contact.account, click_flow(2)), contact)
    run = finished(run)
    assert path_of(run) == ["welcome", "wait_click", "decide", "reminder"]
    assert decisions(run) == ["timeout", "branch"]
    wait_until(lambda: len(smtp_server.messages) == 2, TIMEOUT, "the reminder")
    assert smtp_server.parsed()["Subject"] == "Reminder"
    contact.refresh_from_db()
    assert "engaged" not in contact.tags


def test_a_goal_ends_a_run_waiting_in_a_long_wait(workers, contact):
    service = WorkflowService()
    workflow = service.create(
        account_id=contact.account_id,
        name="Nurture",
        steps=[
            {
                "key": "wait_order",
                "action_type": "wait_for_event",
                "config": {"event": "order.shipped", "timeout": "30 days", "on_timeout": "$end"},
            },
            {"key": "nudge", "action_type": "add_tag", "config": {"tag": "nudged"}},
        ],
        goals=[{"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}],
    )
    service.publish(workflow_id=workflow.pk)
    run = run_of(workflow, contact)
    wait_until(
        lambda: WorkflowExecution.objects.filter(pk=run.pk, status="waiting").exists(), TIMEOUT, "the run to wait"
    )
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run = finished(run)
    assert run.end_reason == "goal met: Bought"
    assert decisions(run) == ["goal"]
    contact.refresh_from_db()
    assert "nudged" not in contact.tags
