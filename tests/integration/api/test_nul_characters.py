"""A NUL character sent to the REST API (issue 21, item 9): a 400 problem naming the field, never a 500, and
nothing written, for every JSON endpoint that writes, the query filters, a path segment and a header. The
API's own checks do this (its parser by `kernel.storable_json`, its filters, converters and key rules);
tests/integration/test_nul_characters.py walks every other way in."""

from __future__ import annotations

import pytest

from contacts.models import Contact, Event
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import make_workflow
from workflows.infrastructure.models import Workflow, WorkflowExecution

pytestmark = pytest.mark.django_db


def _api(api_as, account):
    api = api_as("owner")
    contact = ContactFactory(account=account)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    return api, contact, workflow


JSON_BODIES = [
    ("post", "/api/v1/contacts", {"email": "new@example.com", "first_name": "A\x00"}, "first_name"),
    ("patch", "/api/v1/contacts/{contact}", {"custom_fields": {"plan": "p\x00"}}, "custom_fields.plan"),
    ("post", "/api/v1/contacts/{contact}/tags", {"tag": "v\x00"}, "tag"),
    ("post", "/api/v1/events", {"name": "order.paid", "contact": "{contact}", "data": {"k": "\x00"}}, "data.k"),
    ("post", "/api/v1/workflows", {"name": "W\x00", "trigger": {"type": "api"}, "steps": []}, "name"),
    ("patch", "/api/v1/workflows/{workflow}", {"description": "d\x00"}, "description"),
    ("post", "/api/v1/workflows/{workflow}/executions", {"contact": "{contact}", "trigger_data": {"\x00": 1}}, ""),
    ("post", "/api/v1/schedules", {"name": "S\x00", "cron": "0 9 * * *"}, "name"),
    ("post", "/api/v1/admin/jobs/retry", {"ids": ["\x00"]}, "ids[0]"),
]


@pytest.mark.parametrize(("method", "url", "body", "field"), JSON_BODIES)
def test_a_nul_in_any_json_body_is_a_400_naming_the_field_and_writes_nothing(
    api_as, operator_api, account, method, url, body, field
):
    api, contact, workflow = _api(api_as, account)
    if url.startswith("/api/v1/admin/"):
        api = operator_api
    ids = {"contact": contact.pk, "workflow": workflow.pk}
    url = url.format(**ids)
    body = {k: (ids[v.strip("{}")] if isinstance(v, str) and v.startswith("{") else v) for k, v in body.items()}
    before = (
        Contact.objects.count(),
        Workflow.objects.count(),
        Event.objects.count(),
        WorkflowExecution.objects.count(),
    )
    response = getattr(api, method)(url, body, format="json")
    problem = assert_problem(response, 400)
    assert "contains a NUL character" in problem["detail"]
    assert field in problem["detail"]
    after = (
        Contact.objects.count(),
        Workflow.objects.count(),
        Event.objects.count(),
        WorkflowExecution.objects.count(),
    )
    assert after == before
    contact.refresh_from_db()
    assert (contact.first_name, contact.custom_fields, contact.tags) == ("Ada", {}, [])


@pytest.mark.parametrize("url", ["/api/v1/contacts", "/api/v1/events"])
def test_form_bodies_are_not_taken_by_the_api(api_as, account, url):
    api, _, _ = _api(api_as, account)
    response = api.post(url, "first_name=A%00", content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415)


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/contacts?email=a%00b", "email"),
        ("/api/v1/contacts?tag=a%00b", "tag"),
        ("/api/v1/executions?status=%00", "status"),
        ("/api/v1/jobs?status=%00", "status"),
        ("/api/v1/contacts?cursor=%00", "cursor"),
    ],
)
def test_a_nul_in_an_api_query_parameter_is_a_400_naming_it(api_as, account, url, field):
    api, _, _ = _api(api_as, account)
    assert error_fields(assert_problem(api.get(url), 400)) == [field]


def test_a_nul_in_an_api_path_segment_or_header(api_as, account):
    api, contact, _ = _api(api_as, account)
    contact.tags = ["vip"]
    contact.save()
    response = api.delete(f"/api/v1/contacts/{contact.pk}/tags/vip%00")
    assert error_fields(assert_problem(response, 400)) == ["tag"]
    response = api.post(
        "/api/v1/events",
        {"name": "order.paid", "contact": contact.pk},
        format="json",
        headers={"Idempotency-Key": "key\x00"},
    )
    assert error_fields(assert_problem(response, 400)) == ["Idempotency-Key"]
    assert not Event.objects.exists()
