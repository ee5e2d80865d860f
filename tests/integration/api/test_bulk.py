"""Bulk operations by filter: jobs (operators) and runs (per account), in batches, with the counts of what
changed and what was not in a state that allows it, and dry_run."""

import datetime as dt

import pytest
from django.utils import timezone

from jobs.application.operations import job_bulk_retry
from jobs.application.queue import enqueue
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.starting import start_run
from workflows.models import WorkflowExecution

pytestmark = pytest.mark.django_db


def test_cancel_by_filter_counts_what_changed_and_what_was_not_allowed(operator_api, account, other_account, make_job):
    pending = [make_job(account=account, queue="mail") for _ in range(3)]
    retrying = make_job(account=account, status=JobStatus.RETRYING, queue="mail")
    done = make_job(account=account, status=JobStatus.COMPLETED, queue="mail")
    elsewhere = make_job(account=other_account, queue="mail")
    other_queue = make_job(account=account, queue="sms")

    preview = operator_api.post(
        "/api/v1/admin/jobs/cancel?dry_run=true", {"queue": "mail", "account": account.slug}, format="json"
    )
    assert preview.status_code == 200, preview.content
    assert preview.json() == {"matched": 5, "changed": 4, "not_allowed": 1, "conflicts": 0, "dry_run": True}
    assert Job.objects.filter(status=JobStatus.CANCELLED).count() == 0

    body = operator_api.post(
        "/api/v1/admin/jobs/cancel", {"queue": "mail", "account": account.slug}, format="json"
    ).json()
    assert body == {"matched": 5, "changed": 4, "not_allowed": 1, "conflicts": 0, "dry_run": False}
    cancelled = set(Job.objects.filter(status=JobStatus.CANCELLED).values_list("pk", flat=True))
    assert cancelled == {j.pk for j in pending} | {retrying.pk}
    assert all(Job.objects.filter(pk__in=cancelled).values_list("cancelled_at", flat=True))
    assert {Job.objects.get(pk=j.pk).status for j in (done, elsewhere, other_queue)} == {"completed", "pending"}


def test_retry_by_filter_in_batches_with_a_unique_key_conflict_counted(make_job, account):
    dead = [make_job(account=account, status=JobStatus.DEAD, handler="noop") for _ in range(5)]
    held = enqueue("noop", {}, unique_key="nightly")
    clashing = Job.objects.get(pk=held.pk)
    Job.objects.filter(pk=held.pk).update(status=JobStatus.DEAD)
    enqueue("noop", {}, unique_key="nightly")  # another unfinished job now holds the key
    make_job(account=account, status=JobStatus.COMPLETED)

    outcome = job_bulk_retry(status=JobStatus.DEAD, batch_size=2)
    assert (outcome.matched, outcome.changed, outcome.conflicts, outcome.not_allowed) == (6, 5, 1, 0)
    for job in dead:
        job = Job.objects.get(pk=job.pk)
        assert (job.status, job.attempt_number) == (JobStatus.PENDING, 0)
    assert Job.objects.get(pk=clashing.pk).status == JobStatus.DEAD


def test_created_before_and_after_narrow_the_filter(operator_api, make_job):
    old = make_job(status=JobStatus.FAILED, created_at=timezone.now() - dt.timedelta(days=3))
    make_job(status=JobStatus.FAILED)
    cutoff = (timezone.now() - dt.timedelta(days=1)).isoformat()
    body = operator_api.post("/api/v1/admin/jobs/retry", {"created_before": cutoff}, format="json").json()
    assert (body["matched"], body["changed"]) == (1, 1)
    assert Job.objects.get(pk=old.pk).status == JobStatus.PENDING


def test_bulk_jobs_needs_a_filter_valid_values_and_an_operator(operator_api, owner_api):
    assert error_fields(assert_problem(operator_api.post("/api/v1/admin/jobs/retry", {}, format="json"), 400)) == [""]
    assert error_fields(
        assert_problem(operator_api.post("/api/v1/admin/jobs/cancel", {"status": "bogus"}, format="json"), 400)
    ) == ["status"]
    assert error_fields(
        assert_problem(operator_api.post("/api/v1/admin/jobs/cancel", {"stauts": "dead"}, format="json"), 400)
    ) == ["stauts"]
    assert error_fields(
        assert_problem(operator_api.post("/api/v1/admin/jobs/cancel", {"account": "nope"}, format="json"), 400)
    ) == ["account"]
    assert_problem(owner_api.post("/api/v1/admin/jobs/cancel", {"status": "pending"}, format="json"), 403)


@pytest.mark.django_db(transaction=True)
def test_runs_by_filter_pause_resume_cancel_retry_for_the_account_only(api_as, owner_api, account, other_account):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    runs = [
        start_run(workflow_id=workflow.pk, contact_id=ContactFactory(account=account).pk).execution for _ in range(3)
    ]
    WorkflowExecution.objects.filter(pk=runs[2].pk).update(status="completed")
    foreign_workflow = make_workflow(other_account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    foreign = start_run(workflow_id=foreign_workflow.pk, contact_id=ContactFactory(account=other_account).pk).execution

    preview = owner_api.post(
        "/api/v1/executions/pause", {"workflow": workflow.pk, "dry_run": True}, format="json"
    ).json()
    assert preview == {"matched": 3, "changed": 2, "not_allowed": 1, "conflicts": 0, "dry_run": True}
    assert set(WorkflowExecution.objects.filter(account=account).values_list("status", flat=True)) == {
        "queued",
        "completed",
    }

    paused = owner_api.post("/api/v1/executions/pause", {"workflow": workflow.pk}, format="json").json()
    assert (paused["changed"], paused["not_allowed"]) == (2, 1)
    assert {WorkflowExecution.objects.get(pk=r.pk).status for r in runs[:2]} == {"paused"}
    resumed = owner_api.post("/api/v1/executions/resume", {"status": "paused"}, format="json").json()
    assert resumed["changed"] == 2
    cancelled = owner_api.post("/api/v1/executions/cancel", {"status": "queued"}, format="json").json()
    assert (cancelled["matched"], cancelled["changed"]) == (2, 2)
    assert WorkflowExecution.objects.get(pk=foreign.pk).status == "queued"  # another account's run is untouched
    assert owner_api.post("/api/v1/executions/retry", {"status": "cancelled"}, format="json").json()["not_allowed"] == 2

    viewer = api_as("viewer")
    assert_problem(viewer.post("/api/v1/executions/cancel", {"status": "queued"}, format="json"), 403)
    assert error_fields(assert_problem(owner_api.post("/api/v1/executions/cancel", {}, format="json"), 400)) == [""]
