"""Every endpoint that takes a body: a lone surrogate in a JSON object key (`{"\\ud800": 1}`), at the top of the
body or nested in it, is a 400 that names the key's path escaped, and no answer fails to render; a field the
schema does not name is refused, naming it, as the schema says (`additionalProperties: false`).

The endpoints come from the URL conf, and which of them take a body from the served schema (a writable route
the schema does not describe fails the first test), so a new endpoint is covered without touching this file.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from tests.factories import ContactFactory, MembershipFactory, UserFactory
from tests.integration.api.conftest import client_for
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.starting import start_run

pytestmark = pytest.mark.django_db

WRITES = ("post", "put", "patch")
SURROGATE = "\ud800"


def _routes(resolver: URLResolver, prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _routes(pattern, route)
        elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "cls"):
            found.append((route, pattern.callback.cls))
    return found


def _writable_api_operations() -> list[tuple[str, str]]:
    """(method, schema-style path) of every route under /api/ whose view implements a writing method."""
    operations = []
    for route, view in _routes(get_resolver()):
        if not route.startswith("api/"):
            continue
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        operations += [(method, path) for method in WRITES if hasattr(view, method)]
    return sorted(operations)


SCHEMA = SchemaGenerator().get_schema(request=None, public=True)
OPERATIONS = _writable_api_operations()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMA["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _body_schema(method: str, path: str) -> dict[str, Any] | None:
    body = SCHEMA["paths"][path][method].get("requestBody")
    return _resolve(body["content"]["application/json"]["schema"]) if body else None


def _nesting_property(schema: dict[str, Any]) -> str:
    """A property that holds an object or a list of objects (custom_fields, data, action, steps...), else any."""
    properties = schema.get("properties", {})
    for name, prop in properties.items():
        prop = _resolve(prop)
        if prop.get("type") == "object" or "additionalProperties" in prop or "properties" in prop:
            return name
    return next(iter(properties), "anything")


def test_every_writable_api_route_is_in_the_schema():
    assert len(OPERATIONS) > 20, OPERATIONS
    missing = [(method, path) for method, path in OPERATIONS if method not in SCHEMA["paths"].get(path, {})]
    assert missing == []


@pytest.fixture
def world(settings):
    """A superuser who owns an account (account and operator endpoints both answer), and one of each object."""
    settings.API_THROTTLE_RATE = ""
    user = UserFactory(is_superuser=True, is_staff=True)
    account = MembershipFactory(user=user, role="owner").account
    client = client_for(user, account)
    contact = ContactFactory(account=account, tags=["vip"])
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "seen"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    hook = client.post(
        "/api/v1/schedules",
        {"name": "Nudge", "cron": "0 9 * * 1", "timezone": "UTC", "action": {"type": "post_event", "event": "x.y"}},
        format="json",
    )
    assert hook.status_code == 201, hook.content
    from jobs.models import Job

    ids = {
        "contact_id": contact.pk,
        "tag": "vip",
        "workflow_id": workflow.pk,
        "execution_id": run.pk,
        "job_id": Job.objects.filter(account=account).values_list("pk", flat=True).first(),
        "hook_id": hook.json()["id"],
    }
    return client, ids


def _bodies(method: str, path: str) -> list[tuple[dict[str, Any], str]]:
    """(body, the path an answer must name) with the surrogate key at the top, nested, and in a list."""
    schema = _body_schema(method, path) or {}
    prop = _nesting_property(schema)
    return [
        ({SURROGATE: 1}, "\\ud800"),
        ({prop: {"fine": 1, SURROGATE: 1}}, f"{prop}.\\ud800"),
        ({prop: [{"a": {SURROGATE: "x"}}]}, f"{prop}[0].a.\\ud800"),
    ]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_a_surrogate_in_a_key_is_a_400_naming_its_path(world, method, path):
    client, ids = world
    url = re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path)
    takes_a_body = _body_schema(method, path) is not None
    for body, named in _bodies(method, path):
        raw = json.dumps(body)  # ASCII, the surrogate written as \ud800, as a client sends it
        response = getattr(client, method)(url, raw, content_type="application/json")
        text = response.content.decode("utf-8")  # an answer that could not be encoded would have been a 500
        assert response.status_code < 500, (url, raw, text)
        if takes_a_body:
            assert response.status_code == 400, (url, raw, text)
            assert response["Content-Type"] == "application/problem+json"
            problem = json.loads(text)
            assert problem["detail"] == f"JSON parse error - {named} contains an unpaired surrogate", problem


BODY_OPERATIONS = [(method, path) for method, path in OPERATIONS if _body_schema(method, path) is not None]


@pytest.mark.parametrize(("method", "path"), BODY_OPERATIONS, ids=[f"{m} {p}" for m, p in BODY_OPERATIONS])
def test_a_field_the_schema_does_not_name_is_refused_as_it_says(world, method, path):
    schema = _body_schema(method, path) or {}
    assert schema.get("additionalProperties") is False, f"{method} {path}: the schema lets unknown fields through"
    client, ids = world
    url = re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path)
    response = getattr(client, method)(url, {"zz_unknown": 1}, format="json")
    assert response.status_code == 400, (url, response.content)
    assert "zz_unknown" in [e["field"] for e in response.json()["errors"]], response.json()
