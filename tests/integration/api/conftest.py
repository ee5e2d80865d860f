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
from tests.factories import MembershipFactory


class Caller(APIClient):
    """An API client holding a real bearer token."""

    token: str
    token_id: int
    user: object


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
