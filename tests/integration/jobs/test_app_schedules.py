"""An app's own schedules through jobs.public.schedules (what a workflow's scheduled hook uses): the first tick
and the tick after a resume come from the database's clock, a paused schedule does not fire, a deleted one is
gone by id or by name."""

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from jobs.application.schedules import fire_due_schedules
from jobs.models import Job, Schedule
from jobs.public import schedules
from jobs.public.storage import database_now

pytestmark = pytest.mark.django_db


def test_a_schedule_made_by_an_app_starts_at_its_next_tick_in_its_zone():
    made = schedules.schedule_create(
        name="app:1", cron="0 9 * * *", timezone="Europe/Paris", handler="noop", payload={"n": 1}, queue="q"
    )
    stored = Schedule.objects.get(pk=made.pk)
    now = database_now()
    assert now < stored.next_run_at <= now + dt.timedelta(days=1)
    assert stored.next_run_at.astimezone(ZoneInfo("Europe/Paris")).time() == dt.time(9, 0)
    assert (stored.handler, stored.payload, stored.queue, stored.enabled) == ("noop", {"n": 1}, "q", True)


def test_pause_stops_its_ticks_and_resume_starts_from_the_next_one():
    made = schedules.schedule_create(name="app:2", cron="* * * * *", handler="noop", payload={})
    Schedule.objects.filter(pk=made.pk).update(next_run_at=database_now() - dt.timedelta(hours=3))
    schedules.schedule_pause(schedule_id=made.pk)
    assert fire_due_schedules() == 0
    schedules.schedule_resume(schedule_id=made.pk)
    resumed = Schedule.objects.get(pk=made.pk)
    assert resumed.enabled
    assert resumed.next_run_at > database_now() - dt.timedelta(seconds=1)  # the paused hours are not made up
    assert not Job.objects.filter(handler="noop").exists()


def test_pause_resume_and_delete_of_no_schedule_do_nothing():
    schedules.schedule_pause(schedule_id=None)
    schedules.schedule_resume(schedule_id=None)
    schedules.schedule_delete(schedule_id=None)


def test_delete_by_id_or_by_name():
    first = schedules.schedule_create(name="app:3", cron="0 * * * *", handler="noop", payload={})
    schedules.schedule_create(name="app:4", cron="0 * * * *", handler="noop", payload={})
    schedules.schedule_delete(schedule_id=first.pk)
    schedules.schedule_delete(name="app:4")
    assert not Schedule.objects.filter(name__startswith="app:").exists()
