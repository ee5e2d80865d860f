"""Schema-valid requests are accepted: schemathesis against a live server in the test process.

Every operation of the served schema gets requests generated from the schema alone (positive data: what the
schema says is valid), sent over HTTP with a real bearer token to a live server (pytest-django's, a thread of
this process, on the test database). Every answer must be: no 5xx; for a schema-valid request, no 4xx other
than 401/403/404/409/429 (schemathesis' `positive_data_acceptance`), except a 400 about a part of the request
the schema marks `x-relay-checked` (a rule JSON Schema cannot state: a cron expression, the step graph, an
opaque cursor); the documented status, content type and headers; a body matching its schema. So the schema
and the API cannot drift apart: a field the API refuses as null, an unknown field it refuses, a blank filter,
each fails here until the schema says so.

Bounded for CI: API_LIVE_EXAMPLES examples per operation (default 20), derandomized; about a minute or two.
For a longer hunt with fresh random inputs:
    API_LIVE_EXAMPLES=200 API_FUZZ_RANDOM=1 .venv/bin/python -m pytest tests/integration/api/test_schema_live.py
"""

from __future__ import annotations

import itertools
import os
import re
import time
import zoneinfo
from typing import Any

import pytest
import schemathesis
from django.test import Client
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.serializers import CHECKED
from contacts.models import Contact

EXAMPLES = int(os.environ.get("API_LIVE_EXAMPLES", "20"))
DERANDOMIZE = os.environ.get("API_FUZZ_RANDOM") != "1"

# What the schema's own formats are (it names them; JSON Schema leaves formats to the reader).
schemathesis.openapi.format(
    "cron", st.sampled_from(["0 9 * * 1", "*/15 * * * *", "30 2 1 * *", "0 0 * * 0", "5 4 * * sun", "0 */6 * * *"])
)
schemathesis.openapi.format("iana-time-zone", st.sampled_from(sorted(zoneinfo.available_timezones())))

SCHEMA = Client().get("/api/v1/schema/").json()  # the served schema (its view touches no database)
schema = schemathesis.openapi.from_dict(SCHEMA)
schema.config.generation.update(modes=[GenerationMode.POSITIVE], allow_x00=False)

pytestmark = pytest.mark.django_db(transaction=True)


# --- Parts of a request the schema marks as checked beyond what it can state ------------------------------------


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = SCHEMA["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _checked_paths(node: Any, path: str = "", seen: frozenset[str] = frozenset()) -> set[str]:
    """Paths (`steps`, `action.filter[*].value`) of the parts of a body schema marked x-relay-checked."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if ref in seen:
        return set()
    node = _resolve(node)
    if not isinstance(node, dict):
        return set()
    seen = seen | {ref} if ref else seen
    found = {path} if CHECKED in node else set()
    for name, sub in node.get("properties", {}).items():
        found |= _checked_paths(sub, f"{path}.{name}" if path else name, seen)
    if isinstance(node.get("items"), dict):
        found |= _checked_paths(node["items"], f"{path}[*]", seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key, []):
            found |= _checked_paths(sub, path, seen)
    return found


def _checked_for(case) -> set[str]:
    operation = SCHEMA["paths"][case.operation.path][case.method.lower()]
    checked = {p["name"] for p in operation.get("parameters", []) if CHECKED in p.get("schema", {}) or CHECKED in p}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body:
        checked |= _checked_paths(body["schema"])
    return checked


def _covered(field: str, checked: set[str]) -> bool:
    """`steps[2].config.url` is covered by `steps`; an error about the whole body ("") only by the body's mark."""
    field = re.sub(r"\[\d+\]", "[*]", field)
    return any(field == path or (path and field.startswith((f"{path}.", f"{path}["))) for path in checked)


@schemathesis.check
def positive_data_is_accepted(ctx, response, case) -> bool | None:
    """positive_data_acceptance, but for a 400 whose every error is about a part the schema marks as checked."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if response.status_code == 400 and "json" in response.headers.get("content-type", [""])[0]:
            errors = response.json().get("errors") or [{"field": None}]
            checked = _checked_for(case)
            if all(e["field"] is not None and _covered(e["field"], checked) for e in errors):
                return None
        raise


CHECKS = [
    not_a_server_error,
    positive_data_is_accepted,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# --- Generated values the world must make true --------------------------------------------------------------

_unique = itertools.count(1)


def _real(case, world) -> None:
    """Path ids: half real (the other half may 404, which is allowed); ids in a body: always real, since a
    reference to nothing is refused whatever the schema says. Keys that must be unique are made so."""
    params = case.path_parameters or {}
    for name, pool in (("contact_id", "contacts"), ("workflow_id", "workflows")):
        value = str(params.get(name, ""))
        if value.isdigit() and int(value) % 2 == 0:
            params[name] = world[pool][int(value) // 2 % len(world[pool])]
    for name, pool in (("job_id", "jobs"), ("execution_id", "runs")):
        value = str(params.get(name, ""))
        if value[-1:] in set("02468ace"):
            params[name] = world[pool][int(value[-1], 16) % len(world[pool])]
    query = case.query or {}
    if "account" in query:  # an account filter naming no account is refused
        query["account"] = str(world["account"])
    body = case.body if isinstance(case.body, dict) else {}
    if "contact" in body:
        body["contact"] = world["contacts"][hash(str(body["contact"])) % len(world["contacts"])]
    if "workflow" in body:
        body["workflow"] = world["workflows"][hash(str(body["workflow"])) % len(world["workflows"])]
    if "account" in body:
        body["account"] = str(world["account"])
    action = body.get("action")
    if isinstance(action, dict) and "workflow" in action:
        action["workflow"] = world["workflows"][0]
    if isinstance(body.get("email"), str) and body["email"]:
        Contact.objects.filter(email__iexact=body["email"]).delete()  # one contact per address and account
    if case.method in ("PUT", "PATCH") and "contact_id" in params:
        # Whether a change leaves a contact reachable depends on what it has: an earlier example may have
        # blanked its email or its phone. Each example starts from a contact with both.
        Contact.objects.filter(pk=params["contact_id"]).update(email=f"c{params['contact_id']}@example.com")
        Contact.objects.filter(pk=params["contact_id"]).update(phone="+15550100000")
    headers = case.headers or {}
    if "Idempotency-Key" in headers:  # a key reused with another body is refused (422), by design
        headers["Idempotency-Key"] = f"{next(_unique)}-{headers['Idempotency-Key']}"[:200]


# Requests sent per operation, and when the first went: the conftest's terminal summary reports them.
SENT: dict[str, int] = {}
STARTED: list[float] = []


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_schema_valid_requests_are_accepted(case, world, live_server):
    """`world` (conftest): a superuser owning an account, with contacts, jobs, workflows and runs."""
    _real(case, world)
    response = case.call(base_url=live_server.url, headers={"Authorization": f"Bearer {world['token']}"})
    STARTED[:] = STARTED or [time.monotonic()]
    SENT[case.operation.label] = SENT.get(case.operation.label, 0) + 1
    case.validate_response(response, checks=CHECKS)
