"""wait_for_event on both databases: an event wakes the run, the timeout ends the wait the other way, the two
race and exactly one wins, a pause remembers the event, and the lookup is by the index, never a scan.

Jobs run in this thread through `run_due_jobs`, exactly as a worker runs them.
"""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from contacts.application.services import contact_add_tag, contact_update
from jobs.infrastructure.models import Job
from tests.integration.workflows.support import make_due, make_workflow, run_due_jobs
from workflows.application.runs.operating import cancel_run, pause_run, resume_run
from workflows.application.runs.receiving import post_event
from workflows.application.runs.starting import start_run
from workflows.application.runs.waiting import EVENT_HANDLER
from workflows.domain.execution import run_path
from workflows.infrastructure.models import EventWait, ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def path_of(run) -> list[str]:
    """The keys of the steps the run went through (what the API's `path` shows)."""
    return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


def waiting_workflow(account, event="tag.added", match=None, timeout=3600):
    return make_workflow(
        account,
        [
            {
                "key": "wait_vip",
                "action_type": "wait_for_event",
                "config": {
                    "event": event,
                    "match": {"tag": "vip"} if match is None else match,
                    "timeout": timeout,
                    "on_timeout": "late",
                },
                "next": "happened",
            },
            {"key": "happened", "action_type": "add_tag", "config": {"tag": "happened"}, "next": "$end"},
            {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
        ],
    )


def waiting_run(account, contact, **kwargs) -> WorkflowExecution:
    run = start_run(workflow_id=waiting_workflow(account, **kwargs).pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "waiting"
    assert run.current_step_key == "wait_vip"
    return run


def decisions(run) -> list[dict]:
    return [
        d for d in ExecutionLog.objects.filter(execution=run).order_by("id").values_list("decision", flat=True) if d
    ]


def time_out(run) -> None:
    """The wait's timeout passes: its time is in the past and its job due."""
    EventWait.objects.filter(execution=run).update(timeout_at=timezone.now() - timedelta(seconds=1))
    make_due(WorkflowExecution.objects.get(pk=run.pk).next_job_id)


def finish(run) -> WorkflowExecution:
    run_due_jobs()
    run.refresh_from_db()
    return run


def test_the_awaited_event_wakes_the_run_onto_its_next_step(account, contact):
    run = waiting_run(account, contact)
    wait = EventWait.objects.get(execution=run)
    assert (wait.event, wait.match, wait.step_key) == ("tag.added", {"tag": "vip"}, "wait_vip")
    assert run.resume_at == wait.timeout_at

    contact_add_tag(contact_id=contact.pk, tag="other")  # not the tag it waits for
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()
    contact_add_tag(contact_id=contact.pk, tag="vip")
    (wake,) = Job.objects.filter(handler=EVENT_HANDLER)
    assert wake.status == "pending"
    timeout_job = run.next_job_id

    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["wait_vip", "happened"]
    contact.refresh_from_db()
    assert "happened" in contact.tags
    assert "late" not in contact.tags
    (decision,) = decisions(run)
    assert decision["kind"] == "event"
    assert decision["event_id"]
    assert decision["at"]
    assert not EventWait.objects.exists()
    assert Job.objects.get(pk=timeout_job).status == "cancelled"  # the timeout's job is not needed any more


def test_the_timeout_takes_the_other_path(account, contact):
    run = waiting_run(account, contact)
    make_due(run.next_job_id)  # early (the clocks of two hosts differ): it waits the rest
    assert finish(run).status == "waiting"
    time_out(run)
    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["wait_vip", "late"]
    assert decisions(run) == [{"kind": "timeout"}]
    assert not EventWait.objects.exists()
    # An event after the timeout finds nothing waiting: it wakes nothing.
    contact_add_tag(contact_id=contact.pk, tag="vip")
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()


def test_event_and_timeout_race_and_exactly_one_wins(account, contact):
    # The event is recorded first; the timeout's job then runs before the event's job: the event won.
    run = waiting_run(account, contact)
    contact_add_tag(contact_id=contact.pk, tag="vip")
    time_out(run)
    run_due_jobs(handler="workflow_resume")  # the timeout's job, first
    run = finish(run)
    assert path_of(run) == ["wait_vip", "happened"]
    assert [d["kind"] for d in decisions(run)] == ["event"]
    assert WorkflowExecution.objects.get(pk=run.pk).status == "completed"
    assert Job.objects.get(handler=EVENT_HANDLER).status == "completed"  # arrived second: did nothing


def test_an_event_after_the_timeout_loses_even_if_the_timeout_job_is_late(account, contact):
    run = waiting_run(account, contact)
    time_out(run)
    contact_add_tag(contact_id=contact.pk, tag="vip")  # too late: not recorded, no wake-up
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()
    run = finish(run)
    assert decisions(run) == [{"kind": "timeout"}]
    assert path_of(run) == ["wait_vip", "late"]


def test_an_event_during_a_pause_is_remembered_and_acted_on_at_resume(account, contact):
    run = waiting_run(account, contact)
    pause_run(execution_id=run.pk)
    contact_add_tag(contact_id=contact.pk, tag="vip")
    run = finish(run)  # the event's job finds the run paused: nothing moves
    assert run.status == "paused"
    assert EventWait.objects.get(execution=run).event_id
    resume_run(execution_id=run.pk)
    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["wait_vip", "happened"]
    assert [d["kind"] for d in decisions(run)] == ["event"]


def test_a_pause_without_event_waits_the_remainder_or_times_out_at_resume(account, contact):
    run = waiting_run(account, contact)
    pause_run(execution_id=run.pk)
    resume_run(execution_id=run.pk)
    run.refresh_from_db()
    assert run.status == "waiting"  # the remainder
    pause_run(execution_id=run.pk)
    EventWait.objects.filter(execution=run).update(timeout_at=timezone.now() - timedelta(seconds=1))
    WorkflowExecution.objects.filter(pk=run.pk).update(resume_at=timezone.now() - timedelta(seconds=1))
    resume_run(execution_id=run.pk)  # the timeout passed during the pause
    run = finish(run)
    assert path_of(run) == ["wait_vip", "late"]
    assert decisions(run) == [{"kind": "timeout"}]


def test_a_cancelled_run_stops_waiting(account, contact):
    run = waiting_run(account, contact)
    cancel_run(execution_id=run.pk)
    assert not EventWait.objects.exists()
    contact_add_tag(contact_id=contact.pk, tag="vip")
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()


def test_a_custom_event_with_conditions_and_a_contact_update(account, contact):
    custom = waiting_run(
        account,
        contact,
        event="order.paid",
        match={"conditions": [{"field": "event.total", "op": "greater_than", "value": 40}]},
    )
    post_event(account_id=account.pk, contact_id=contact.pk, name="order.paid", data={"total": 10})
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()
    post_event(account_id=account.pk, contact_id=contact.pk, name="order.paid", data={"total": 50})
    custom = finish(custom)
    assert path_of(custom) == ["wait_vip", "happened"]
    assert custom.context["steps"][0]["event"] == {"total": 50}

    updated = waiting_run(account, contact, event="contact.updated", match={"field": "first_name", "value": "Ada"})
    contact_update(contact_id=contact.pk, fields={"first_name": "Bob"})
    assert finish(updated).status == "waiting"
    contact_update(contact_id=contact.pk, fields={"first_name": "ada"})
    assert path_of(finish(updated)) == ["wait_vip", "happened"]


def test_a_wait_for_one_custom_field_is_not_woken_by_another(account, contact):
    """Watching `plan` while the contact has none: a change of `seats` leaves the run waiting; plan being set
    wakes it. Through the contacts service, as the API, the admin and update steps change contacts."""
    assert "plan" not in contact.custom_fields
    run = waiting_run(account, contact, event="contact.updated", match={"field": "custom_fields.plan"})
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"seats": 3}})
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": None}})  # still no plan
    contact_update(contact_id=contact.pk, fields={"first_name": "Grace"})
    assert not Job.objects.filter(handler=EVENT_HANDLER).exists()
    assert finish(run).status == "waiting"
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro"}})  # absent -> set
    run = finish(run)
    assert path_of(run) == ["wait_vip", "happened"]
    assert run.context["steps"][0]["event"] == {"changed": ["custom_fields"], "changed_custom_fields": ["plan"]}


def test_a_wait_for_one_custom_field_hears_its_removal_but_not_the_same_value(account, contact):
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro", "seats": 1}})
    run = waiting_run(account, contact, event="contact.updated", match={"field": "custom_fields.plan"})
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro", "seats": 2}})  # plan: same
    assert finish(run).status == "waiting"
    # PUT-like: the custom fields replaced whole, without plan (set -> removed)
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"seats": 2}}, merge_custom_fields=False)
    assert path_of(finish(run)) == ["wait_vip", "happened"]

    valued = waiting_run(
        account, contact, event="contact.updated", match={"field": "custom_fields.plan", "value": "team"}
    )
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "pro"}})
    assert finish(valued).status == "waiting"  # plan changed, but not to team
    contact_update(contact_id=contact.pk, fields={"custom_fields": {"plan": "team"}})
    assert path_of(finish(valued)) == ["wait_vip", "happened"]


@pytest.mark.postgres
def test_the_lookup_is_by_the_index_never_a_scan(account, contact):
    from workflows.infrastructure.waits import _LOOKUP

    waiting_run(account, contact)
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + _LOOKUP, [account.pk, contact.pk, "tag.added"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("SET enable_seqscan = on")
    assert "event_wait_lookup" in plan, plan
