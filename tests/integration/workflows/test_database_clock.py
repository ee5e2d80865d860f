"""The engine stores every time on the database's clock, whatever the host's clock says.

This process's clock (Django's `timezone.now`, what a worker host's clock is to the code) runs two minutes
fast, while the database's is right. On SQLite the database's clock is the host's, read through the seam
`jobs.infrastructure.clock.host_now`, which stands for it here: it keeps the right time. A wait's end, a
step retry's due time, a wait_for_event's timeout, the run's and its log rows' times must be the database's
(within a second or two); a host-clock `now` anywhere puts them two minutes late."""

import datetime as dt

import pytest
from django.utils import timezone

from contacts.application.services import contact_add_tag
from jobs.infrastructure import clock
from jobs.infrastructure.clock import now_of
from jobs.infrastructure.models import Job
from tests.integration.workflows.support import end_wait_now, make_due, make_workflow, run_due_jobs
from workflows.application.runs.operating import cancel_run, pause_run, resume_run
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import EventWait, ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

SKEW = dt.timedelta(minutes=2)
CLOSE = dt.timedelta(seconds=2)


class FastDatetime(dt.datetime):
    """What Django's `timezone.now` reads on a host whose clock runs two minutes fast."""

    @classmethod
    def now(cls, tz=None):
        return dt.datetime.now(tz) + SKEW


@pytest.fixture
def fast_host(monkeypatch):
    """The host's clock two minutes fast (`timezone.now`, however it was imported); the database's (and, on
    SQLite, the seam standing for it) right."""
    monkeypatch.setattr(clock, "host_now", lambda: dt.datetime.now(dt.UTC))
    monkeypatch.setattr(timezone, "datetime", FastDatetime)
    assert timezone.now() - dt.datetime.now(dt.UTC) > SKEW - CLOSE


def database_now() -> dt.datetime:
    from django.db import connection

    return now_of(connection)


def _near(value: dt.datetime | None, expected: dt.datetime, what: str) -> None:
    assert value is not None, f"{what} is not set"
    off = (value - expected).total_seconds()
    assert abs(off) < CLOSE.total_seconds(), f"{what} is {off:+.1f} s off the database's clock"


def _start(account, contact, steps) -> WorkflowExecution:
    workflow = make_workflow(account, steps)
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution


def test_a_ten_minute_wait_ends_ten_minutes_after_the_databases_now(account, contact, fast_host):
    run = _start(
        account,
        contact,
        [{"action_type": "wait", "config": {"duration": 600}}, {"action_type": "add_tag", "config": {"tag": "b"}}],
    )
    assert run_due_jobs() == 1
    run.refresh_from_db()
    now = database_now()
    assert run.status == "waiting"
    _near(run.resume_at, now + dt.timedelta(minutes=10), "the wait's resume_at")
    assert Job.objects.get(pk=run.next_job_id).run_at == run.resume_at
    _near(run.created_at, now, "the run's created_at")
    _near(run.started_at, now, "the run's started_at")
    _near(run.updated_at, now, "the run's updated_at")
    (wait_log,) = ExecutionLog.objects.filter(execution=run)
    _near(wait_log.started_at, now, "the wait's log row")

    end_wait_now(run.pk)
    assert run_due_jobs() == 2  # the wait's end, the tag
    run.refresh_from_db()
    assert run.status == "completed"
    _near(run.completed_at, database_now(), "the run's completed_at")


def test_a_wait_whose_job_comes_early_by_the_databases_clock_waits_the_rest(account, contact, fast_host):
    run = _start(account, contact, [{"action_type": "wait", "config": {"duration": 600}}])
    run_due_jobs()
    # The wait ends in a minute by the database's clock (a minute ago by the host's), and its job runs now.
    resume_at = database_now() + dt.timedelta(minutes=1)
    WorkflowExecution.objects.filter(pk=run.pk).update(resume_at=resume_at)
    make_due(WorkflowExecution.objects.get(pk=run.pk).next_job_id)
    assert run_due_jobs() == 1
    run.refresh_from_db()
    assert run.status == "waiting", "the wait ended a minute early: by the host's clock"
    assert run.resume_at == resume_at
    assert Job.objects.get(pk=run.next_job_id).run_at == resume_at


def test_a_step_retry_is_due_its_delay_after_the_databases_failure_time(account, contact, webhook_server, fast_host):
    webhook_server.answers = [(503, {}, "down")]
    run = _start(account, contact, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    assert run_due_jobs() == 1
    run.refresh_from_db()
    assert run.status == "queued"
    (failed,) = ExecutionLog.objects.filter(execution=run)
    delay = dt.timedelta(seconds=failed.response_data["retry_in_seconds"])
    now = database_now()
    _near(run.resume_at - delay, now, "the failure time the retry is due after")
    _near(run.resume_at - delay, run.updated_at, "the failure time the retry is due after")
    assert Job.objects.get(pk=run.next_job_id).run_at == run.resume_at
    _near(failed.started_at, now, "the attempt's log row")


def test_a_wait_for_events_timeout_is_on_the_databases_clock(account, contact, fast_host):
    run = _start(
        account,
        contact,
        [
            {
                "key": "wait_vip",
                "action_type": "wait_for_event",
                "config": {"event": "tag.added", "match": {"tag": "vip"}, "timeout": 3600, "on_timeout": "late"},
                "next": "happened",
            },
            {"key": "happened", "action_type": "add_tag", "config": {"tag": "happened"}, "next": "$end"},
            {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
        ],
    )
    run_due_jobs()
    run.refresh_from_db()
    now = database_now()
    assert run.status == "waiting"
    _near(run.resume_at, now + dt.timedelta(hours=1), "the timeout's resume_at")
    _near(EventWait.objects.get(execution=run).timeout_at, now + dt.timedelta(hours=1), "the wait's timeout_at")
    contact_add_tag(contact_id=contact.pk, tag="vip")
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert "happened" in contact.__class__.objects.get(pk=contact.pk).tags
    _near(run.completed_at, database_now(), "the run's completed_at")


def test_an_operators_moves_are_on_the_databases_clock(account, contact, fast_host):
    steps = [{"action_type": "wait", "config": {"duration": 600}}, {"action_type": "add_tag", "config": {"tag": "b"}}]
    run = _start(account, contact, steps)
    run_due_jobs()
    pause_run(execution_id=run.pk)
    resumed = resume_run(execution_id=run.pk)  # waits the remainder, on the database's clock
    assert resumed.status == "waiting"
    _near(resumed.updated_at, database_now(), "the run's updated_at")
    cancelled = cancel_run(execution_id=run.pk)
    _near(cancelled.completed_at, database_now(), "a cancelled run's completed_at")


def _claimed() -> list:
    from jobs.application.context import context_for
    from jobs.infrastructure.store import get_store
    from tests.integration.workflows.support import TEST_WORKER

    store = get_store()
    return [(job.payload, context_for(job, store, TEST_WORKER)) for job in store.claim(TEST_WORKER, None, 100, 60)]


def test_waits_begun_together_end_ten_minutes_after_the_databases_now(account, fast_host):
    from tests.factories import ContactFactory
    from workflows.application.runs.batches import run_steps

    workflow = make_workflow(account, [{"action_type": "wait", "config": {"duration": 600}}])
    runs = [start_run(workflow_id=workflow.pk, contact_id=ContactFactory(account=account).pk).execution for _ in "abc"]
    assert run_steps(_claimed()) == []  # all three carried out together
    now = database_now()
    for run in runs:
        run.refresh_from_db()
        assert run.status == "waiting"
        _near(run.resume_at, now + dt.timedelta(minutes=10), "a batched wait's resume_at")
        _near(run.started_at, now, "a batched run's started_at")


def test_step_retries_recorded_together_are_due_after_the_databases_failure_time(account, webhook_server, fast_host):
    from tests.factories import ContactFactory
    from workflows.application.runs.batches import run_steps

    webhook_server.answers = [(503, {}, "down")]
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    runs = [start_run(workflow_id=workflow.pk, contact_id=ContactFactory(account=account).pk).execution for _ in "ab"]
    assert run_steps(_claimed()) == []
    now = database_now()
    for run in runs:
        run.refresh_from_db()
        assert run.status == "queued"
        (failed,) = ExecutionLog.objects.filter(execution=run)
        delay = dt.timedelta(seconds=failed.response_data["retry_in_seconds"])
        _near(run.resume_at - delay, now, "a batched retry's failure time")
        _near(failed.started_at, now, "a batched attempt's log row")


def test_an_event_before_the_timeout_by_the_databases_clock_wins_the_wait(account, contact, fast_host):
    """The event comes 30 s before the timeout by the database's clock, 90 s after it by the host's: it wins."""
    run = _start(
        account,
        contact,
        [
            {
                "key": "wait_vip",
                "action_type": "wait_for_event",
                "config": {"event": "tag.added", "match": {"tag": "vip"}, "timeout": 30, "on_timeout": "late"},
                "next": "happened",
            },
            {"key": "happened", "action_type": "add_tag", "config": {"tag": "happened"}, "next": "$end"},
            {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
        ],
    )
    run_due_jobs()
    contact_add_tag(contact_id=contact.pk, tag="vip")
    wait = EventWait.objects.get(execution=run)
    assert wait.event_id, "the event was refused as later than the timeout"
    _near(wait.event_at, database_now(), "the event's time on the wait")
    run_due_jobs()
    assert "happened" in contact.__class__.objects.get(pk=contact.pk).tags


def test_a_goal_is_met_at_the_databases_now(account, contact, fast_host):
    from workflows.application.workflows import WorkflowService
    from workflows.infrastructure.models import GoalHit

    bought = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}
    service = WorkflowService()
    workflow = service.create(
        account_id=account.pk,
        name="Nurture",
        steps=[{"action_type": "wait", "config": {"duration": 600}}],
        goals=[bought],
        reenrollment="always",
    )
    service.publish(workflow_id=workflow.pk)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    contact_add_tag(contact_id=contact.pk, tag="customer")
    _near(GoalHit.objects.get(execution=run).met_at, database_now(), "the goal's met_at")
    run_due_jobs()
    run.refresh_from_db()
    assert run.end_reason == "goal met: Bought"
    _near(run.completed_at, database_now(), "the run the goal ended")


def test_a_tracked_event_is_stored_at_the_databases_now(account, contact, fast_host):
    from contacts.application.events import record_contact_event
    from contacts.infrastructure.models import Event

    record_contact_event(account_id=account.pk, contact_id=contact.pk, name="email.opened", data={"step": 1})
    _near(Event.objects.get(name="email.opened").occurred_at, database_now(), "a tracked open's occurred_at")


def test_a_contacts_changes_are_stamped_with_the_databases_now(account, contact, fast_host):
    from contacts.application.services import contact_remove_tag

    contact_add_tag(contact_id=contact.pk, tag="vip")
    _near(contact.__class__.objects.get(pk=contact.pk).updated_at, database_now(), "a tagged contact's updated_at")
    contact_remove_tag(contact_id=contact.pk, tag="vip")
    _near(contact.__class__.objects.get(pk=contact.pk).updated_at, database_now(), "an untagged contact's updated_at")
    run = _start(account, contact, [{"action_type": "update_contact", "config": {"custom_fields": {"plan": "pro"}}}])
    run_due_jobs()
    run.refresh_from_db()
    changed = contact.__class__.objects.get(pk=contact.pk)
    assert changed.custom_fields["plan"] == "pro"
    _near(changed.updated_at, run.completed_at, "a contact a step changed")
