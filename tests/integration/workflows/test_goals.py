"""Goals on both databases: met by an event, a run ends COMPLETED ("goal met: <name>") from every state it
can be in (queued, waiting, waiting for an event, mid-retry, paused, a step in flight), or jumps to a step;
no later step starts. A goal with an unknown field is refused naming its path, and nothing is stored.

Jobs run in this thread through `run_due_jobs`, exactly as a worker runs them.
"""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connection

from contacts.application.services import contact_add_tag
from jobs.infrastructure.models import Job
from tests.integration.workflows.support import run_due_jobs
from workflows.application.runs.goals import GOAL_HANDLER
from workflows.application.runs.operating import pause_run
from workflows.application.runs.receiving import post_event
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.execution import run_path
from workflows.infrastructure.models import EventWait, ExecutionLog, GoalHit, Workflow, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def path_of(run) -> list[str]:
    """The keys of the steps the run went through (what the API's `path` shows)."""
    return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


BOUGHT = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}


def goal_workflow(account, steps, goals=(BOUGHT,)):
    service = WorkflowService()
    workflow = service.create(
        account_id=account.pk, name="Nurture", steps=steps, goals=list(goals), reenrollment="always"
    )
    service.publish(workflow_id=workflow.pk)
    return workflow


def start(workflow, contact) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution


def ended_by_goal(run, name="Bought") -> None:
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.end_reason == f"goal met: {name}"
    goal_rows = [d for d in ExecutionLog.objects.filter(execution=run).values_list("decision", flat=True) if d]
    assert [d["kind"] for d in goal_rows if d.get("kind") == "goal"] == ["goal"]
    assert not EventWait.objects.filter(execution=run).exists()


def tags(contact) -> list[str]:
    contact.refresh_from_db()
    return contact.tags


NURTURE = [
    {"key": "first", "action_type": "add_tag", "config": {"tag": "first"}},
    {"key": "pause", "action_type": "wait", "config": {"duration": "2 days"}},
    {"key": "second", "action_type": "add_tag", "config": {"tag": "second"}},
]


def test_from_queued_the_next_step_never_starts(account, contact):
    run = start(goal_workflow(account, NURTURE), contact)  # QUEUED: its first step's job not run yet
    contact_add_tag(contact_id=contact.pk, tag="customer")
    assert GoalHit.objects.get(execution=run).goal == "Bought"
    run_due_jobs(handler="workflow_step")  # the step's job comes first: it finds the goal met, runs nothing
    ended_by_goal(run)
    run_due_jobs()
    assert "first" not in tags(contact)
    assert Job.objects.get(handler=GOAL_HANDLER).status == "completed"  # came second: nothing left to do


def test_from_a_wait(account, contact):
    run = start(goal_workflow(account, NURTURE), contact)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "waiting"
    resume_job = run.next_job_id
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    ended_by_goal(run)
    assert Job.objects.get(pk=resume_job).status == "cancelled"
    assert "second" not in tags(contact)


def test_from_an_event_wait(account, contact):
    steps = [
        {
            "key": "wait_click",
            "action_type": "wait_for_event",
            "config": {"event": "order.shipped", "timeout": "3 days", "on_timeout": "$end"},
        },
        {"key": "after", "action_type": "add_tag", "config": {"tag": "after"}},
    ]
    run = start(goal_workflow(account, steps), contact)
    run_due_jobs()
    assert EventWait.objects.filter(execution=run).exists()
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    ended_by_goal(run)
    assert "after" not in tags(contact)


def test_mid_retry(account, contact, webhook_server):
    webhook_server.answers = [(500, {}, "{}")]
    steps = [
        {"key": "call", "action_type": "webhook", "config": {"url": webhook_server.url + "/x"}},
        {"key": "after", "action_type": "add_tag", "config": {"tag": "after"}},
    ]
    run = start(goal_workflow(account, steps), contact)
    run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.retry_count) == ("queued", 1)  # its retry is due later
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    ended_by_goal(run)
    assert len(webhook_server.received) == 1


def test_while_paused(account, contact):
    run = start(goal_workflow(account, NURTURE), contact)
    run_due_jobs()
    pause_run(execution_id=run.pk)
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    ended_by_goal(run)


def test_a_step_in_flight_finishes_and_nothing_after_it_starts(account, contact):
    """The event that meets the goal happens while a webhook step is in flight (the receiver tags the contact)."""

    class Tagging(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            contact_add_tag(contact_id=contact.pk, tag="customer")  # committed by this thread's own connection
            connection.close()
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Tagging)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        steps = [
            {"key": "call", "action_type": "webhook", "config": {"url": f"http://127.0.0.1:{server.server_port}/"}},
            {"key": "after", "action_type": "add_tag", "config": {"tag": "after"}},
        ]
        run = start(goal_workflow(account, steps), contact)
        run_due_jobs()
    finally:
        server.shutdown()
    ended_by_goal(run)
    outcomes = list(ExecutionLog.objects.filter(execution=run).order_by("id").values_list("step_key", "outcome"))
    assert outcomes == [("call", "succeeded"), ("call", "skipped")]  # the step finished and was logged; the goal
    assert "after" not in tags(contact)


def test_a_goal_may_jump_to_a_step_instead(account, contact):
    steps = [
        *NURTURE,
        {"key": "thanks", "action_type": "add_tag", "config": {"tag": "thanks"}, "next": "$end"},
    ]
    steps[2] = {**steps[2], "next": "thanks"}  # (a step only a goal leads to is refused as unreachable)
    goal = {**BOUGHT, "then": "thanks"}
    run = start(goal_workflow(account, steps, goals=[goal]), contact)
    run_due_jobs()
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert run.end_reason == ""
    assert path_of(run) == ["first", "pause", "thanks"]
    assert "thanks" in tags(contact)
    assert "second" not in tags(contact)
    contact_add_tag(contact_id=contact.pk, tag="other")  # met once per run
    assert GoalHit.objects.count() == 1


def test_a_goal_on_the_event_itself(account, contact):
    paid = {"name": "Paid", "conditions": [{"field": "event.name", "op": "equals", "value": "order.paid"}]}
    run = start(goal_workflow(account, NURTURE, goals=[paid]), contact)
    run_due_jobs()
    post_event(account_id=account.pk, contact_id=contact.pk, name="order.refunded", data={})
    assert not GoalHit.objects.exists()
    post_event(account_id=account.pk, contact_id=contact.pk, name="order.paid", data={"total": 3})
    run_due_jobs()
    ended_by_goal(run, "Paid")


@pytest.mark.parametrize(
    ("goals", "path"),
    [
        (
            [{"name": "Bought", "conditions": [{"field": "frist_name", "op": "equals", "value": "x"}]}],
            "goals[0].conditions[0].field",
        ),
        ([{**BOUGHT, "colour": "red"}], "goals[0].colour"),
        ([{**BOUGHT, "then": "nowhere"}], "goals[0].then"),
        ([{"name": "Empty", "conditions": []}], "goals[0].conditions"),
        ([BOUGHT, BOUGHT], "goals[1].name"),
        ("Bought", "goals"),
    ],
)
def test_a_bad_goal_is_refused_naming_its_path_and_nothing_is_stored(account, goals, path):
    with pytest.raises(WorkflowValidationError) as refused:
        WorkflowService().create(account_id=account.pk, name="Nurture", steps=NURTURE, goals=goals)
    assert path in [error.path for error in refused.value.errors]
    assert not Workflow.objects.exists()
