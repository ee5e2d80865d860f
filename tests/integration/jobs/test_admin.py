"""The jobs admin's actions, through the admin's own changelist POST (as a browser sends it)."""

import pytest
from django.urls import reverse

from jobs.application.queue import enqueue
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
