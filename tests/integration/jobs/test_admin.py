"""The jobs admin's actions, through the admin's own changelist POST (as a browser sends it)."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.application.queue import enqueue
from jobs.domain.ids import uuid7
from jobs.domain.states import JobStatus
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _job(status: str, **fields) -> Job:
    job = enqueue("noop", {}, **fields)
    Job.objects.filter(pk=job.pk).update(status=status, attempt_number=3)
    return Job.objects.get(pk=job.pk)


def _act(client, action: str, jobs: list[Job]):
    return client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": action, "_selected_action": [str(job.pk) for job in jobs]},
        follow=True,
    )


def test_retry_selected_jobs_puts_dead_ones_back_and_says_why_others_were_refused(client, superuser, account):
    client.force_login(superuser)
    dead = _job(JobStatus.DEAD, account=account)  # an account's job: the changelist joins its account
    failed = _job(JobStatus.FAILED)
    completed = _job(JobStatus.COMPLETED)
    response = _act(client, "retry_jobs", [dead, failed, completed])
    assert response.status_code == 200
    messages = [str(m) for m in response.context["messages"]]
    assert "2 job(s) retried." in messages
    assert f"{completed.pk}: cannot retry a job that is completed" in messages
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert statuses == {dead.pk: "pending", failed.pk: "pending", completed.pk: "completed"}
    assert Job.objects.get(pk=dead.pk).attempt_number == 0


def test_cancel_selected_jobs_cancels_pending_and_retrying_ones(client, superuser, account):
    client.force_login(superuser)
    pending = _job(JobStatus.PENDING, account=account)
    retrying = _job(JobStatus.RETRYING)
    running = _job(JobStatus.RUNNING)
    response = _act(client, "cancel_jobs", [pending, retrying, running])
    assert response.status_code == 200
    messages = [str(m) for m in response.context["messages"]]
    assert "2 job(s) cancelled." in messages
    assert any(m.startswith(f"{running.pk}: cannot cancel") for m in messages), messages
    statuses = dict(Job.objects.values_list("pk", "status"))
    assert statuses == {pending.pk: "cancelled", retrying.pk: "cancelled", running.pk: "running"}


def test_the_changelist_lists_newest_first_and_filters_by_age_on_the_primary_key(client, superuser):
    client.force_login(superuser)
    old = _job(JobStatus.COMPLETED)
    back_then = uuid7(at=(timezone.now() - dt.timedelta(days=3)).timestamp())  # made three days ago
    Job.objects.filter(pk=old.pk).update(id=back_then, created_at=timezone.now() - dt.timedelta(days=3))
    first, second = _job(JobStatus.PENDING), _job(JobStatus.PENDING)
    url = reverse("admin:jobs_job_changelist")
    listed = [job.pk for job in client.get(url).context["cl"].result_list]
    assert listed == [second.pk, first.pk, back_then]
    recent = [job.pk for job in client.get(url, {"created": "24h"}).context["cl"].result_list]
    assert recent == [second.pk, first.pk]
    assert [job.pk for job in client.get(url, {"created": "older"}).context["cl"].result_list] == []
    assert [job.pk for job in client.get(url, {"created": "7d"}).context["cl"].result_list] == listed


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 11 *"])
def test_a_schedule_whose_cron_never_fires_is_a_form_error_on_cron(client, superuser, cron):
    from jobs.models import Schedule

    client.force_login(superuser)
    response = client.post(
        reverse("admin:jobs_schedule_add"),
        {"name": "never", "cron": cron, "timezone": "UTC", "handler": "noop", "payload": "{}", "queue": "default"}
        | {"priority": "0", "enabled": "on"},
    )
    assert response.status_code == 200  # the form again, not a 500 and not a redirect
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["cron"], errors
    assert "never fires" in errors["cron"][0]
    assert not Schedule.objects.filter(name="never").exists()
