"""The jobs endpoints: the account's own jobs, and the operators' view across accounts."""

import uuid
from datetime import timedelta

import pytest

from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.integration.api.conftest import assert_problem, client_for, error_fields

pytestmark = pytest.mark.django_db

CANARY = "canary-7f3a9c-do-not-leak"
VALIDATION = "urn:relay:problem:validation-error"


# --- The account's jobs ---------------------------------------------------------------------


def test_account_jobs_newest_first_without_other_accounts(owner_api, account, other_account, make_job):
    older = make_job(account=account)
    newer = make_job(account=account, status=JobStatus.COMPLETED)
    make_job(account=other_account)
    make_job(account=None)
    body = owner_api.get("/api/v1/jobs").json()
    assert [row["id"] for row in body["results"]] == [str(newer.pk), str(older.pk)]


def test_a_job_row_carries_what_an_owner_needs_and_never_the_payload(owner_api, account, make_job):
    job = make_job(account=account, status=JobStatus.RETRYING, payload={"secret": CANARY}, attempt_number=2)
    row = owner_api.get("/api/v1/jobs").json()["results"][0]
    assert set(row) == {
        "id",
        "handler",
        "queue",
        "status",
        "priority",
        "attempt_number",
        "max_attempts",
        "next_attempt_at",
        "last_error",
        "created_at",
        "started_at",
        "completed_at",
        "failed_at",
        "expires_at",
        "dead_letter_reason",
        "snoozes",
    }
    assert row["handler"] == "noop"
    assert row["status"] == "retrying"
    assert row["attempt_number"] == 2
    assert row["max_attempts"] == job.max_attempts
    assert row["next_attempt_at"] is not None  # due again at run_at
    assert row["last_error"] == "ServerFailure: 503 from https://api.example.com"


def test_next_attempt_is_null_once_the_job_is_not_waiting(owner_api, account, make_job):
    make_job(account=account, status=JobStatus.COMPLETED)
    row = owner_api.get("/api/v1/jobs").json()["results"][0]
    assert row["next_attempt_at"] is None
    assert row["last_error"] is None


def test_account_jobs_filter_by_state(owner_api, account, make_job):
    dead = make_job(account=account, status=JobStatus.DEAD)
    make_job(account=account, status=JobStatus.PENDING)
    rows = owner_api.get("/api/v1/jobs?state=dead").json()["results"]
    assert [r["id"] for r in rows] == [str(dead.pk)]


def test_an_unknown_state_is_a_400_naming_the_allowed_ones(owner_api):
    body = assert_problem(owner_api.get("/api/v1/jobs?state=exploded"), 400, type_=VALIDATION)
    assert error_fields(body) == ["state"]
    for state in JobStatus:
        assert state.value in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("role", "allowed"), [("owner", True), ("admin", True), ("marketer", False), ("viewer", False)]
)
def test_account_jobs_need_view_jobs(api_as, account, make_job, role, allowed):
    job = make_job(account=account)
    api = api_as(role)
    for path in ("/api/v1/jobs", f"/api/v1/jobs/{job.pk}"):
        response = api.get(path)
        if allowed:
            assert response.status_code == 200
        else:
            body = assert_problem(response, 403)
            assert "view_jobs" in body["detail"]


def test_account_jobs_need_a_token(anonymous, account, make_job):
    job = make_job(account=account)
    assert_problem(anonymous.get("/api/v1/jobs"), 401)
    assert_problem(anonymous.get(f"/api/v1/jobs/{job.pk}"), 401)


def test_one_account_job(owner_api, account, make_job):
    job = make_job(account=account)
    body = owner_api.get(f"/api/v1/jobs/{job.pk}").json()
    assert body["id"] == str(job.pk)


def test_another_accounts_job_is_byte_identical_to_a_missing_one(owner_api, other_account, make_job):
    theirs = make_job(account=other_account)
    foreign = owner_api.get(f"/api/v1/jobs/{theirs.pk}")
    absent = owner_api.get(f"/api/v1/jobs/{uuid.uuid4()}")
    assert_problem(foreign, 404)
    assert foreign.content == absent.content
    assert_problem(owner_api.get("/api/v1/jobs/not-a-uuid"), 404)


# --- Operators ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/admin/jobs"),
        ("get", "/api/v1/admin/jobs/stats"),
        ("get", "/api/v1/admin/jobs/{id}"),
        ("delete", "/api/v1/admin/jobs/{id}"),
        ("post", "/api/v1/admin/jobs/{id}/retry"),
    ],
)
def test_operator_endpoints_are_for_superusers_only(owner_api, anonymous, account, make_job, method, path):
    job = make_job(account=account, status=JobStatus.DEAD)
    url = path.format(id=job.pk)
    body = assert_problem(getattr(owner_api, method)(url), 403)  # an account owner is no operator
    assert "operators" in body["detail"]
    assert_problem(getattr(anonymous, method)(url), 401)
    job.refresh_from_db()
    assert job.status == JobStatus.DEAD


def test_a_superusers_account_token_reaches_the_operator_endpoints(superuser, account):
    assert client_for(superuser, account).get("/api/v1/admin/jobs").status_code == 200


def test_stats(operator_api, account, other_account, make_job):
    make_job(account=account, status=JobStatus.COMPLETED)
    make_job(account=account, status=JobStatus.COMPLETED)
    make_job(account=other_account, status=JobStatus.DEAD)
    make_job(account=other_account, status=JobStatus.PENDING)
    body = operator_api.get("/api/v1/admin/jobs/stats").json()
    assert body["counts"] == {
        "pending": 1,
        "running": 0,
        "completed": 2,
        "retrying": 0,
        "failed": 0,
        "dead": 1,
        "cancelled": 0,
    }
    assert body["failure_rate"] == pytest.approx(1 / 3)
    assert body["avg_duration_seconds"] == pytest.approx(2.0, abs=0.5)
    # The flat keys clients of the first API read, beside `counts`.
    flat = {key: body[key] for key in ("pending", "running", "completed", "failed", "retrying", "dead")}
    assert flat == {"pending": 1, "running": 0, "completed": 2, "failed": 0, "retrying": 0, "dead": 1}
    mine = operator_api.get(f"/api/v1/admin/jobs/stats?account={account.slug}").json()
    assert mine["counts"]["completed"] == 2
    assert mine["counts"]["dead"] == mine["dead"] == 0
    assert mine["failure_rate"] == 0


def test_stats_carry_the_runs_by_status_so_a_failing_workflow_shows(operator_api, account, other_account):
    from tests.factories import ContactFactory
    from tests.integration.workflows.support import make_workflow
    from workflows.application.runs.starting import start_run
    from workflows.infrastructure.models import WorkflowExecution

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    runs = [start_run(workflow_id=workflow.pk, contact_id=ContactFactory(account=account).pk) for _ in range(3)]
    WorkflowExecution.objects.filter(pk=runs[0].execution.pk).update(status="failed")
    other = make_workflow(other_account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    start_run(workflow_id=other.pk, contact_id=ContactFactory(account=other_account).pk)

    body = operator_api.get("/api/v1/admin/jobs/stats").json()
    assert body["runs"] == {
        "queued": 3,
        "active": 0,
        "paused": 0,
        "waiting": 0,
        "completed": 0,
        "failed": 1,
        "cancelled": 0,
    }
    mine = operator_api.get(f"/api/v1/admin/jobs/stats?account={account.slug}").json()
    assert (mine["runs"]["queued"], mine["runs"]["failed"]) == (2, 1)


def test_stats_before_anything_finished(operator_api):
    body = operator_api.get("/api/v1/admin/jobs/stats").json()
    assert body["failure_rate"] is None
    assert body["avg_duration_seconds"] is None
    assert set(body["counts"]) == {s.value for s in JobStatus}


def test_operator_list_filters(operator_api, account, other_account, make_job):
    dead = make_job(account=account, status=JobStatus.DEAD, queue="email")
    other = make_job(account=other_account, status=JobStatus.DEAD)
    make_job(account=account, status=JobStatus.PENDING)

    def ids(query: str) -> list[str]:
        response = operator_api.get(f"/api/v1/admin/jobs?{query}")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert ids("status=dead") == [str(other.pk), str(dead.pk)]
    assert ids("status=dead&queue=email") == [str(dead.pk)]
    assert ids(f"status=dead&account={other_account.slug}") == [str(other.pk)]
    assert ids(f"status=dead&account={account.pk}") == [str(dead.pk)]
    assert ids("handler=noop&status=dead") == [str(other.pk), str(dead.pk)]
    assert ids("handler=missing") == []
    row = operator_api.get(f"/api/v1/admin/jobs?account={account.slug}&status=dead").json()["results"][0]
    assert row["account"] == account.pk
    assert row["account_slug"] == account.slug
    assert "payload" not in row


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=bogus", "status"),
        ("account=no-such-account", "account"),
        ("account=99999999", "account"),
        ("account=%C2%B3", "account"),  # a digit to str.isdigit(), not to int()
        ("account=" + "9" * 30, "account"),
    ],
)
def test_operator_list_refuses_unknown_values(operator_api, query, field):
    body = assert_problem(operator_api.get(f"/api/v1/admin/jobs?{query}"), 400, type_=VALIDATION)
    assert error_fields(body) == [field]


def test_operator_detail_and_missing(operator_api, other_account, make_job):
    job = make_job(account=other_account, status=JobStatus.RUNNING)
    body = operator_api.get(f"/api/v1/admin/jobs/{job.pk}").json()
    assert body["id"] == str(job.pk)
    assert body["worker_id"] == "worker-test"
    assert body["account_slug"] == other_account.slug
    assert_problem(operator_api.get(f"/api/v1/admin/jobs/{uuid.uuid4()}"), 404)


@pytest.mark.parametrize("status", [JobStatus.DEAD, JobStatus.FAILED, JobStatus.RETRYING])
def test_retry_puts_the_job_back_to_pending_with_attempt_zero(operator_api, account, make_job, status):
    job = make_job(account=account, status=status)
    response = operator_api.post(f"/api/v1/admin/jobs/{job.pk}/retry")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "pending"
    assert response.json()["attempt_number"] == 0
    job.refresh_from_db()
    assert (job.status, job.attempt_number) == (JobStatus.PENDING, 0)


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.PENDING, JobStatus.RUNNING, JobStatus.CANCELLED])
def test_retry_of_a_job_that_cannot_be_retried_is_409_naming_its_state(operator_api, account, make_job, status):
    job = make_job(account=account, status=status)
    body = assert_problem(
        operator_api.post(f"/api/v1/admin/jobs/{job.pk}/retry"), 409, type_="urn:relay:problem:invalid-state"
    )
    assert body["current_state"] == status.value
    assert status.value in body["detail"]
    job.refresh_from_db()
    assert job.status == status


def test_retry_when_another_job_holds_the_unique_key_is_409(operator_api, account, make_job):
    dead = make_job(account=account, status=JobStatus.DEAD, unique_key=f"key-{CANARY}")
    make_job(account=account, status=JobStatus.PENDING, unique_key=f"key-{CANARY}")
    response = operator_api.post(f"/api/v1/admin/jobs/{dead.pk}/retry")
    assert_problem(response, 409, type_="urn:relay:problem:conflict")
    assert CANARY not in response.content.decode()
    dead.refresh_from_db()
    assert dead.status == JobStatus.DEAD


@pytest.mark.parametrize("status", [JobStatus.PENDING, JobStatus.RETRYING])
def test_cancel(operator_api, account, make_job, status):
    job = make_job(account=account, status=status)
    response = operator_api.delete(f"/api/v1/admin/jobs/{job.pk}")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


@pytest.mark.parametrize(
    "status", [JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.FAILED, JobStatus.CANCELLED]
)
def test_cancel_in_another_state_is_409_naming_it(operator_api, account, make_job, status):
    job = make_job(account=account, status=status)
    body = assert_problem(operator_api.delete(f"/api/v1/admin/jobs/{job.pk}"), 409)
    assert body["current_state"] == status.value
    job.refresh_from_db()
    assert job.status == status


def test_retry_and_cancel_of_a_missing_job_are_404(operator_api):
    missing = uuid.uuid4()
    assert_problem(operator_api.post(f"/api/v1/admin/jobs/{missing}/retry"), 404)
    assert_problem(operator_api.delete(f"/api/v1/admin/jobs/{missing}"), 404)


# --- The canary ---------------------------------------------------------------------------------


def test_a_payload_canary_never_appears_in_any_jobs_response(owner_api, operator_api, account, make_job):
    jobs = {
        status: make_job(account=account, status=status, payload={"note": CANARY, "nested": {"token": CANARY}})
        for status in JobStatus
    }
    dead, pending = jobs[JobStatus.DEAD], jobs[JobStatus.PENDING]
    responses = [
        owner_api.get("/api/v1/jobs"),
        owner_api.get("/api/v1/jobs?page_size=1"),
        owner_api.get("/api/v1/jobs?state=dead"),
        owner_api.get(f"/api/v1/jobs/{dead.pk}"),
        operator_api.get("/api/v1/admin/jobs"),
        operator_api.get(f"/api/v1/admin/jobs?account={account.slug}"),
        operator_api.get("/api/v1/admin/jobs?status=pending"),
        operator_api.get("/api/v1/admin/jobs/stats"),
        operator_api.get(f"/api/v1/admin/jobs/{dead.pk}"),
        operator_api.post(f"/api/v1/admin/jobs/{dead.pk}/retry"),
        operator_api.delete(f"/api/v1/admin/jobs/{pending.pk}"),
        operator_api.delete(f"/api/v1/admin/jobs/{jobs[JobStatus.COMPLETED].pk}"),  # a 409
        operator_api.post(f"/api/v1/admin/jobs/{jobs[JobStatus.RUNNING].pk}/retry"),  # a 409
    ]
    for response in responses:
        assert response.status_code in (200, 409), response.content
        assert CANARY not in response.content.decode()
        assert "payload" not in response.content.decode()
    assert Job.objects.filter(payload__note=CANARY).count() == len(JobStatus)  # the canary was there to leak


def test_an_expired_job_is_a_dead_letter_with_the_reason_expired_in_every_view(
    owner_api, operator_api, account, make_job
):
    from jobs.infrastructure.clock import database_now
    from jobs.infrastructure.store import get_store

    expired = make_job(account=account, expires_at=database_now() - timedelta(seconds=1))
    assert get_store().expire_overdue() == [expired.pk]
    exhausted = make_job(account=account, status=JobStatus.DEAD)
    pending = make_job(account=account)

    rows = {row["id"]: row for row in owner_api.get("/api/v1/jobs").json()["results"]}
    assert (rows[str(expired.pk)]["status"], rows[str(expired.pk)]["dead_letter_reason"]) == ("dead", "expired")
    assert rows[str(expired.pk)]["last_error"].startswith("JobExpired: not started before its deadline")
    assert rows[str(expired.pk)]["expires_at"] is not None
    assert rows[str(exhausted.pk)]["dead_letter_reason"] == "attempts_exhausted"
    assert rows[str(pending.pk)]["dead_letter_reason"] is None
    detail = operator_api.get(f"/api/v1/admin/jobs/{expired.pk}").json()
    assert (detail["status"], detail["dead_letter_reason"], detail["attempt_number"]) == ("dead", "expired", 0)
    dead = operator_api.get("/api/v1/admin/jobs?status=dead").json()["results"]
    assert {row["id"]: row["dead_letter_reason"] for row in dead} == {
        str(expired.pk): "expired",
        str(exhausted.pk): "attempts_exhausted",
    }
    stats = operator_api.get("/api/v1/admin/jobs/stats").json()
    assert stats["dead"] == 2
    assert stats["dead_letters"] == {"expired": 1, "attempts_exhausted": 1, "permanent": 0}


def test_account_jobs_list_in_the_order_they_were_enqueued_newest_first(owner_api, account):
    # Many in the same millisecond, one by one and in bulk: the order is still the order of creation.
    ids = [enqueue("noop", {"n": n}, account=account).pk for n in range(30)]
    ids += enqueue_many(JobSpec("noop", {"n": n}, account=account) for n in range(30))
    seen = []
    url = "/api/v1/jobs?page_size=25"
    while url:
        body = owner_api.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert seen == [str(pk) for pk in reversed(ids)]
    created = [Job.objects.get(pk=pk).created_at for pk in reversed(ids)]
    assert created == sorted(created, reverse=True)
