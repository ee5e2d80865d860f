"""The graph over HTTP: steps with keys and next, a run's path and decisions, and refused graphs."""

import pytest
from django.urls import reverse

from tests.factories import ContactFactory
from tests.integration.api.conftest import error_fields
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs import starting
from workflows.models import Workflow, WorkflowStep

pytestmark = pytest.mark.django_db(transaction=True)
STEPS = [
    {
        "key": "check",
        "action_type": "branch",
        "config": {
            "branches": [
                {"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "vip"}
            ],
            "default": "$end",
        },
    },
    {"key": "vip", "action_type": "add_tag", "config": {"tag": "seen_vip"}},
]


def test_a_graph_is_saved_and_given_back(owner_api):
    response = owner_api.post("/api/v1/workflows", {"name": "Graph", "steps": STEPS}, format="json")
    assert response.status_code == 201, response.content
    steps = response.json()["steps"]
    assert [s["key"] for s in steps] == ["check", "vip"]
    assert steps[0]["config"]["default"] == "$end"


def test_a_linear_body_without_keys_gets_generated_ones(owner_api):
    body = {"name": "Linear", "steps": [{"action_type": "add_tag", "config": {"tag": "a"}}] * 2}
    response = owner_api.post("/api/v1/workflows", body, format="json")
    assert response.status_code == 201, response.content
    assert [s["key"] for s in response.json()["steps"]] == ["step_1", "step_2"]
    assert all("next" not in s for s in response.json()["steps"])


def test_a_refused_graph_names_the_field_and_stores_nothing(owner_api):
    bad = [dict(STEPS[0], config=dict(STEPS[0]["config"], default="nowhere")), STEPS[1]]
    response = owner_api.post("/api/v1/workflows", {"name": "Bad", "steps": bad}, format="json")
    assert response.status_code == 400
    assert error_fields(response.json()) == ["steps[0].config.default"]
    split = {
        "key": "ab",
        "action_type": "split",
        "config": {"paths": [{"name": "A", "weight": 50, "next": "$end"}, {"name": "B", "weight": 49, "next": "$end"}]},
    }
    response = owner_api.post("/api/v1/workflows", {"name": "Bad", "steps": [split]}, format="json")
    assert response.status_code == 400
    assert error_fields(response.json()) == ["steps[0].config.paths"]
    assert Workflow.objects.count() == 0
    assert WorkflowStep.objects.count() == 0


def test_the_run_detail_shows_the_path_and_each_decision(owner_api, account):
    contact = ContactFactory(account=account, tags=["vip"])
    workflow = make_workflow(account, STEPS)
    run = starting.start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    body = owner_api.get(f"/api/v1/executions/{run.pk}").json()
    assert body["status"] == "completed"
    assert body["path"] == ["check", "vip"]
    assert body["current_step_key"] is None
    assert body["end_reason"] is None
    first, second = body["logs"]
    assert first["step_key"] == "check"
    assert first["decision"] == {
        "kind": "branch",
        "branch": "VIP",
        "default": False,
        "values": {"tags": ["vip"]},
        "next": "vip",
    }
    assert second["step_key"] == "vip"
    assert second["decision"] == {}
    logs = owner_api.get(f"/api/v1/executions/{run.pk}/logs").json()
    assert [row["step_key"] for row in logs["results"]] == ["check", "vip"]


def test_the_admin_run_page_shows_the_path(client, superuser, account):
    client.force_login(superuser)
    contact = ContactFactory(account=account, tags=["vip"])
    run = starting.start_run(workflow_id=make_workflow(account, STEPS).pk, contact_id=contact.pk).execution
    run_due_jobs()
    page = client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).content.decode()
    assert 'data-testid="run-path"' in page
    assert "check → vip" in page
