"""Waits until a date or a time of day, and conditions on dates, read on the contact's clock (its own zone,
else its phone number's, else the account's), the account's, or a named zone; DST gaps included."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.factories import ContactFactory
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def waited(account, contact, config) -> tuple[datetime, dict]:
    workflow = make_workflow(
        account, [{"action_type": "wait", "config": config}, {"action_type": "add_tag", "config": {"tag": "done"}}]
    )
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    assert run_due_jobs() == 1
    run = WorkflowExecution.objects.get(pk=run.pk)
    assert run.status == "waiting"
    log = ExecutionLog.objects.get(execution=run, step_index=0)
    assert run.resume_at is not None
    return run.resume_at, log.response_data


def local(moment: datetime, zone: str) -> datetime:
    return moment.astimezone(ZoneInfo(zone)).replace(tzinfo=None)


@pytest.mark.parametrize(
    ("own", "phone", "account_zone", "expected"),
    [
        ("Asia/Tokyo", "+33612345678", "UTC", "Asia/Tokyo"),  # its own
        ("", "+33612345678", "America/Chicago", "Europe/Paris"),  # its phone's
        ("", "+18005550123", "America/Chicago", "America/Chicago"),  # toll-free says nothing: the account's
    ],
)
def test_a_time_of_day_wait_goes_on_at_the_next_nine_on_the_contacts_clock(account, own, phone, account_zone, expected):
    account.time_zone = account_zone
    account.save()
    contact = ContactFactory(account=account, time_zone=own, phone=phone)
    before = datetime.now(UTC)
    resume_at, data = waited(account, contact, {"time_of_day": "09:00"})
    assert local(resume_at, expected).time() == time(9, 0)
    assert before < resume_at <= before + timedelta(days=1, hours=1)
    assert data["time_zone"] == expected


def test_the_accounts_clock_or_a_named_one(account):
    account.time_zone = "Asia/Kolkata"
    account.save()
    contact = ContactFactory(account=account, time_zone="Asia/Tokyo")
    resume_at, data = waited(account, contact, {"time_of_day": "18:30", "time_zone": "account"})
    assert (local(resume_at, "Asia/Kolkata").time(), data["time_zone"]) == (time(18, 30), "Asia/Kolkata")
    resume_at, _ = waited(account, contact, {"time_of_day": "07:15", "time_zone": "America/Sao_Paulo"})
    assert local(resume_at, "America/Sao_Paulo").time() == time(7, 15)


def test_a_date_without_an_offset_in_a_dst_gap_moves_to_the_jump(account):
    contact = ContactFactory(account=account, time_zone="America/New_York")
    # 14 March 2027, 02:30 does not exist in New York (02:00 -> 03:00 EDT): the wait ends at 03:00 EDT.
    resume_at, data = waited(account, contact, {"until": "2027-03-14T02:30"})
    assert resume_at == datetime(2027, 3, 14, 7, 0, tzinfo=UTC)
    assert data == {"resume_at": "2027-03-14T07:00:00+00:00", "time_zone": "America/New_York"}
    # A bare date is its midnight on that clock; an offset names its own instant whatever the clock.
    resume_at, _ = waited(account, contact, {"until": "2027-01-05"})
    assert resume_at == datetime(2027, 1, 5, 5, 0, tzinfo=UTC)
    resume_at, data = waited(account, contact, {"until": "2027-01-05T09:00:00+01:00"})
    assert (resume_at, "time_zone" in data) == (datetime(2027, 1, 5, 8, 0, tzinfo=UTC), False)


def test_a_templated_date_is_read_on_the_clock_when_the_step_runs(account):
    contact = ContactFactory(account=account, time_zone="Europe/Paris", custom_fields={"visit": "2027-07-01T10:00"})
    resume_at, _ = waited(account, contact, {"until": "{{ contact.custom_fields.visit }}"})
    assert resume_at == datetime(2027, 7, 1, 8, 0, tzinfo=UTC)


def test_a_branch_reads_a_bare_date_on_the_contacts_calendar(account):
    """Renews at 16:00 UTC on 1 June: before 2 June in London, but already the 2nd in Tokyo."""
    workflow = make_workflow(
        account,
        [
            {
                "key": "check",
                "action_type": "branch",
                "config": {
                    "branches": [
                        {
                            "name": "soon",
                            "conditions": [{"field": "custom_fields.renews", "op": "before", "value": "2026-06-02"}],
                            "next": "soon",
                        }
                    ],
                    "default": "later",
                },
            },
            {"key": "soon", "action_type": "add_tag", "config": {"tag": "soon"}, "next": "$end"},
            {"key": "later", "action_type": "add_tag", "config": {"tag": "later"}},
        ],
    )
    tags = {}
    for zone in ("Europe/London", "Asia/Tokyo"):
        contact = ContactFactory(account=account, time_zone=zone, custom_fields={"renews": "2026-06-01T16:00:00Z"})
        start_run(workflow_id=workflow.pk, contact_id=contact.pk)
        run_due_jobs()
        contact.refresh_from_db()
        tags[zone] = contact.tags
    assert tags == {"Europe/London": ["soon"], "Asia/Tokyo": ["later"]}
