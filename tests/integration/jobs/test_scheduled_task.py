"""Seed 001's built-in `scheduled_task`: a schedule that runs any registered job by name with its own payload,
made in the admin (Schedules) or JOB_SCHEDULES, checked when saved, queued once per tick by a real worker."""

import datetime as dt

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from django.utils import timezone

from jobs.application.queue import InvalidJob, enqueue
from jobs.application.schedules import fire_due_schedules, sync_schedules
from jobs.application.worker import Worker
from jobs.models import Job, Schedule

pytestmark = pytest.mark.django_db(transaction=True)

EMAIL = {"to": "ada@example.com", "subject": "Weekly report", "text": "Here it is."}


def run_worker() -> None:
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()


def form(**changes) -> dict:
    return {
        "name": "weekly-report",
        "cron": "0 8 * * 1",
        "timezone": "Europe/Paris",
        "handler": "scheduled_task",
        "payload": '{"handler": "send_email", "payload": {"to": "ada@example.com", "subject": "Hi", "text": "Hello"}}',
        "queue": "default",
        "priority": "0",
        "enabled": "on",
        **changes,
    }


def test_an_operator_schedules_any_registered_job_in_the_admin(client, superuser, account):
    client.force_login(superuser)
    response = client.post(reverse("admin:jobs_schedule_add"), form())
    assert response.status_code == 302, response.context["adminform"].form.errors
    schedule = Schedule.objects.get(name="weekly-report")
    assert schedule.payload["handler"] == "send_email"
    assert schedule.next_run_at > timezone.now()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"handler": "no_such_job"}', "handler: must name a registered job handler (not 'no_such_job')"),
        ('{"handler": "send_email", "payload": {"to": "ada@example.com"}}', "payload: subject: is missing"),
        ('{"handler": "scheduled_task"}', "handler: must name the job to run, not scheduled_task itself"),
        ('{"handler": "log_message", "queues": "x"}', "queues: is not a field of scheduled_task"),
    ],
)
def test_a_task_that_could_not_be_queued_is_a_form_error_on_the_payload(client, superuser, payload, message):
    client.force_login(superuser)
    response = client.post(reverse("admin:jobs_schedule_add"), form(payload=payload))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["payload"]
    assert errors["payload"][0].startswith(message), errors["payload"][0]
    assert not Schedule.objects.exists()


def test_a_handler_that_refuses_the_ticks_keys_is_pointed_to_scheduled_task(client, superuser):
    """webhook_delivery refuses unknown payload keys, and every tick adds scheduled_for: each tick would fail."""
    client.force_login(superuser)
    payload = '{"url": "https://hooks.example.com/x"}'
    response = client.post(reverse("admin:jobs_schedule_add"), form(handler="webhook_delivery", payload=payload))
    error = response.context["adminform"].form.errors["payload"][0]
    assert error.startswith("scheduled_for and missed_ticks: webhook_delivery refuses what each tick adds")
    assert 'schedule it through scheduled_task, payload {"handler": "webhook_delivery"' in error


def test_each_tick_queues_the_named_job_once_with_exactly_its_payload(account):
    tick = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=3)  # three more ticks missed
    Schedule.objects.create(
        name="every-minute-email",
        cron="* * * * *",
        handler="scheduled_task",
        payload={"handler": "send_email", "payload": {**EMAIL, "account": account.pk}, "account": account.pk},
        next_run_at=tick,
    )
    assert fire_due_schedules() == 1
    assert fire_due_schedules() == 0  # the missed ticks fold into one
    run_worker()
    (task,) = Job.objects.filter(handler="scheduled_task")
    (email,) = Job.objects.filter(handler="send_email")
    assert task.status == "completed"
    assert task.payload["scheduled_for"] == tick.isoformat()
    assert email.payload == {**EMAIL, "account": account.pk}  # no scheduled_for: exactly its own payload
    assert (email.account_id, email.status) == (account.pk, "completed")


def test_a_task_queues_on_its_queue_with_its_priority_and_attempts():
    Schedule.objects.create(
        name="log",
        cron="* * * * *",
        handler="scheduled_task",
        payload={"handler": "log_message", "payload": {"message": "hi"}, "queue": "reports", "priority": 5}
        | {"max_attempts": 2, "expires_in": 600},
        next_run_at=timezone.now() - dt.timedelta(seconds=1),
    )
    assert fire_due_schedules() == 1
    Worker(burst=True, concurrency=1, queues=["default"], install_signal_handlers=False).run()
    (job,) = Job.objects.filter(handler="log_message")
    assert (job.queue, job.priority, job.max_attempts, job.payload) == ("reports", 5, 2, {"message": "hi"})
    assert job.expires_at is not None


def test_job_schedules_may_name_it_and_a_bad_one_stops_start_up(settings):
    settings.JOB_SCHEDULES = {
        "nightly-digest": {"cron": "0 2 * * *", "handler": "scheduled_task", "payload": {"handler": "log_message"}}
    }
    sync_schedules()
    assert Schedule.objects.get(name="nightly-digest").payload == {"handler": "log_message"}
    settings.JOB_SCHEDULES = {"broken": {"cron": "0 2 * * *", "handler": "scheduled_task", "payload": {}}}
    with pytest.raises(ImproperlyConfigured, match="must name a registered job handler"):
        sync_schedules()


def test_enqueued_by_hand_it_is_checked_too():
    with pytest.raises(InvalidJob, match=r"payload\.handler"):
        enqueue("scheduled_task", {"handler": 42})
