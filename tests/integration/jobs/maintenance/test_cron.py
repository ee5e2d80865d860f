"""Cron firing (jobs.application.maintenance.cron): a due schedule's tick is enqueued once by the service."""

import datetime as dt

import pytest
from django.utils import timezone

from jobs.application.maintenance.cron import CronFiring
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Job, Schedule
from tests.support.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_services_fire_a_due_tick_once_and_stop():
    tick = timezone.now().replace(microsecond=0) - dt.timedelta(seconds=1)
    Schedule.objects.create(name="every-minute", cron="* * * * *", handler="log_message", next_run_at=tick)
    services = [CronFiring(using=queue_database(), every=0.05) for _ in range(2)]  # two workers
    for service in services:
        service.start()
    try:
        wait_until(lambda: Schedule.objects.get(name="every-minute").next_run_at > tick, 10, "the tick to fire")
        wait_until(lambda: Job.objects.filter(handler="log_message").exists(), 5, "the tick's job")
    finally:
        assert all(service.stop() for service in services)
    assert Job.objects.filter(handler="log_message").count() == 1
    assert Schedule.objects.get(name="every-minute").last_run_at == tick
