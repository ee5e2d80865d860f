"""API test helpers: callers with real tokens, and jobs in any state."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.application.tokens import api_token_create
from jobs.application.queue import enqueue
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.factories import ContactFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.operating import pause_run
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.models import ExecutionLog, WorkflowExecution


class Caller(APIClient):
    """An API client holding a real bearer token."""

    token: str
    token_id: int
    user: object


def pytest_terminal_summary(terminalreporter) -> None:
    """How much the live schemathesis run sent, for CI's log (figures to quote, and a run that sent nothing)."""
    import sys
    import time

    live = sys.modules.get("tests.integration.api.test_schema_live")
    if live is not None and live.SENT:
        terminalreporter.write_line(
            f"schemathesis (positive data, live server): {sum(live.SENT.values())} requests over "
            f"{len(live.SENT)} operations in {time.monotonic() - live.STARTED[0]:.0f} s, "
            f"at most {live.EXAMPLES} generated examples per operation"
        )


def client_for(user, account) -> Caller:
    token, secret = api_token_create(user_id=user.pk, account_id=account.pk if account else None, name="test")
    client = Caller()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    client.token, client.token_id, client.user = secret, token.pk, user
    return client


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api_as(account) -> Callable[..., Caller]:
    """api_as("viewer") -> a client for a new member of `account` with that role (or of `in_account`)."""

    def make(role: str = "owner", in_account=None) -> Caller:
        target = in_account or account
        user = MembershipFactory(account=target, role=role).user
        return client_for(user, target)

    return make


@pytest.fixture
def owner_api(api_as) -> Caller:
    return api_as("owner")


@pytest.fixture
def operator_api(superuser) -> Caller:
    """A superuser's operator token (it acts for no account)."""
    return client_for(superuser, None)


@pytest.fixture
def anonymous() -> APIClient:
    return APIClient()


@pytest.fixture
def make_job() -> Callable[..., Job]:
    """A job queued for real (enqueue), then put in the state a test needs."""

    def make(*, account=None, status: str = JobStatus.PENDING, payload: dict | None = None, **changes) -> Job:
        job = enqueue("noop", payload or {}, account=account, queue=changes.pop("queue", "default"))
        job = Job.objects.get(pk=job.pk)
        now = timezone.now()
        job.status = status
        if status in (JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.DEAD):
            job.attempt_number = 1
            job.started_at = now - timedelta(seconds=2)
        if status == JobStatus.COMPLETED:
            job.completed_at = now
        if status in (JobStatus.FAILED, JobStatus.DEAD, JobStatus.RETRYING):
            job.failed_at = now
            job.error_message = "ServerFailure: 503 from https://api.example.com"
        if status == JobStatus.RUNNING:
            job.lease_expires_at = now + timedelta(minutes=5)
            job.worker_id = "worker-test"
        for name, value in changes.items():
            setattr(job, name, value)
        job.save()
        return job

    return make


def assert_problem(response, status: int, *, type_: str | None = None) -> dict:
    """The response is an RFC 9457 problem document with `status`; returns it."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/problem+json", response["Content-Type"]
    body = response.json()
    assert body["status"] == status
    assert set(body) >= {"type", "title", "status", "detail"}
    assert isinstance(body["detail"], str)
    assert body["detail"]
    if type_ is not None:
        assert body["type"] == type_, body
    return body


def error_fields(body: dict) -> list[str]:
    return [e["field"] for e in body.get("errors", [])]


@pytest.fixture
def world(db, make_job, settings):
    """A superuser who owns an account (so both account and operator endpoints answer), with data to find."""
    settings.API_THROTTLE_RATE = ""  # the fuzzer sends far more than a client would
    user = UserFactory(is_superuser=True, is_staff=True)
    account = MembershipFactory(user=user, role="owner").account
    _, secret = api_token_create(user_id=user.pk, account_id=account.pk)
    contacts = [ContactFactory(account=account, tags=["vip"]) for _ in range(3)]
    jobs = [make_job(account=account, status=status) for status in JobStatus]
    workflows = _workflows(account)
    runs = _runs(workflows[0], contacts)
    return {
        "token": secret,
        "account": account.pk,
        "contacts": [c.pk for c in contacts],
        "jobs": [str(j.pk) for j in jobs],
        "workflows": [w.pk for w in workflows],
        "runs": [str(r.pk) for r in runs],
    }


def _workflows(account) -> list:
    """Active (with a webhook step whose credentials must never show), draft, paused and archived."""
    hook = {
        "action_type": "webhook",
        "config": {"url": "https://hooks.example.com/T0/secret", "headers": {"Authorization": "Bearer x-secret-1"}},
    }
    tag = {"action_type": "add_tag", "config": {"tag": "seen"}}
    trigger = {"type": "event", "event": "order.paid"}
    active = make_workflow(account, [hook, tag], trigger=trigger, reenrollment="always")
    draft = make_workflow(account, [tag], publish=False)
    paused = make_workflow(account, [tag])
    WorkflowService().pause(workflow_id=paused.pk)
    archived = make_workflow(account, [tag])
    WorkflowService().archive(workflow_id=archived.pk)
    return [active, draft, paused, archived]


def _runs(workflow, contacts) -> list:
    """Runs in several states, one with a log row."""
    runs = [start_run(workflow_id=workflow.pk, contact_id=c.pk).execution for c in contacts]
    pause_run(execution_id=runs[1].pk)
    WorkflowExecution.objects.filter(pk=runs[2].pk).update(status="failed", last_error="ServerFailure: 503")
    ExecutionLog.objects.create(
        execution=runs[2],
        step_index=0,
        step_name="hook",
        action_type="webhook",
        attempt_number=1,
        outcome="failed",
        started_at=runs[2].created_at,
        error_category="server_error",
        error_details="ServerFailure: 503",
        response_data={"status_code": 503},
    )
    return runs
