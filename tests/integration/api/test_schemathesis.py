"""Property tests of the whole API against its own schema (schemathesis).

Every operation of /api/v1/schema/ gets generated requests - valid and
edge-case bodies, query strings and path parameters - sent in-process
through Django's full stack (middleware, URL resolver, DRF) inside the test
transaction. Every answer must be: no 5xx, a documented status code, the
documented content type and headers, and a body matching its schema.

Bounded and deterministic for CI: API_FUZZ_EXAMPLES examples per operation
(default 30), derandomized. For a longer hunt with fresh random inputs:
    API_FUZZ_EXAMPLES=500 API_FUZZ_RANDOM=1 .venv/bin/python -m pytest tests/integration/api/test_schemathesis.py
"""

import os

import pytest
import schemathesis
from django.test.client import ClientHandler
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.application.tokens import api_token_create
from jobs.domain.states import JobStatus
from tests.factories import ContactFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.operating import pause_run
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.models import ExecutionLog, WorkflowExecution

EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "30"))
DERANDOMIZE = os.environ.get("API_FUZZ_RANDOM") != "1"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

_handler = ClientHandler(enforce_csrf_checks=False)


def django_wsgi(environ, start_response):
    """Django's full stack as a WSGI app, the way its test client drives it.

    Unlike the production WSGIHandler it does not close the database
    connection after each request, so the requests run inside the test's
    transaction and everything is rolled back after the test.
    """
    response = _handler(environ)
    headers = list(response.items()) + [("Set-Cookie", c.output(header="")) for c in response.cookies.values()]
    start_response(f"{response.status_code} {response.reason_phrase}", headers)
    return [response.content]


# Loaded through the served endpoint, as a client would (the schema view touches no database).
schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", django_wsgi)


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


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_schema(case, world):
    # Half the generated ids are swapped for real ones, so success paths are explored too.
    params = case.path_parameters or {}
    contact_id = str(params.get("contact_id", ""))
    if contact_id.isdigit() and int(contact_id) % 2 == 0:
        params["contact_id"] = world["contacts"][int(contact_id) % len(world["contacts"])]
    job_id = str(params.get("job_id", ""))
    if job_id[-1:] in set("02468ace"):
        params["job_id"] = world["jobs"][int(job_id[-1], 16) % len(world["jobs"])]
    workflow_id = str(params.get("workflow_id", ""))
    if workflow_id.isdigit() and int(workflow_id) % 2 == 0:
        params["workflow_id"] = world["workflows"][int(workflow_id) // 2 % len(world["workflows"])]
    execution_id = str(params.get("execution_id", ""))
    if execution_id[-1:] in set("02468ace"):
        params["execution_id"] = world["runs"][int(execution_id[-1], 16) % len(world["runs"])]
    body = case.body if isinstance(case.body, dict) else {}
    if isinstance(body.get("contact"), int) and body["contact"] % 2 == 0:
        body["contact"] = world["contacts"][body["contact"] % len(world["contacts"])]
    response = case.call(headers={"Authorization": f"Bearer {world['token']}"})
    case.validate_response(response, checks=CHECKS)
    assert "x-secret-1" not in response.text  # a webhook step's credentials never show
