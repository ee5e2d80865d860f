"""The admin: build a workflow with its steps, see errors on the fields they name, publish, start a run, watch it."""

import json

import pytest
from django.urls import reverse

from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.executions import ExecutionService
from workflows.infrastructure.models import Workflow, WorkflowExecution, WorkflowStep, WorkflowVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def form_data(account, steps, *, name="Welcome", trigger_type="manual", event="", tag="", existing=(), **extra):
    data = {
        "account": account.pk,
        "name": name,
        "description": "",
        "trigger_type": trigger_type,
        "trigger_event": event,
        "trigger_tag": tag,
        "trigger_filter": "[]",
        "reenrollment": "never",
        "steps-TOTAL_FORMS": len(steps),
        "steps-INITIAL_FORMS": len(existing),
        "steps-MIN_NUM_FORMS": 0,
        "steps-MAX_NUM_FORMS": 1000,
        "versions-TOTAL_FORMS": 0,
        "versions-INITIAL_FORMS": 0,
        "versions-MIN_NUM_FORMS": 0,
        "versions-MAX_NUM_FORMS": 1000,
        **extra,
    }
    for index, step in enumerate(steps):
        data[f"steps-{index}-position"] = step.get("position", index)
        data[f"steps-{index}-name"] = step.get("name", "")
        data[f"steps-{index}-action_type"] = step["action_type"]
        data[f"steps-{index}-config"] = json.dumps(step.get("config", {}))
        if index < len(existing):
            data[f"steps-{index}-id"] = existing[index].pk
            data[f"steps-{index}-workflow"] = existing[index].workflow_id
    return data


def test_create_a_workflow_with_its_steps(admin_client, account):
    steps = [
        {"position": 20, "name": "Email", "action_type": "send_email", "config": {"subject": "Hi", "text": "x"}},
        {"position": 10, "name": "Tag", "action_type": "add_tag", "config": {"tag": "New"}},
    ]
    response = admin_client.post(reverse("admin:workflows_workflow_add"), form_data(account, steps))
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow = Workflow.objects.get()
    assert workflow.status == "draft"
    assert list(workflow.steps.values_list("position", "name", "action_type")) == [
        (0, "Tag", "add_tag"),  # ordered by the positions given, renumbered
        (1, "Email", "send_email"),
    ]


def test_errors_land_on_the_step_and_field_they_name(admin_client, account):
    steps = [
        {"action_type": "add_tag", "config": {"tag": "ok"}},
        {"action_type": "webhook", "config": {"url": "ftp://example.com", "methd": "POST"}},
    ]
    response = admin_client.post(
        reverse("admin:workflows_workflow_add"), form_data(account, steps, trigger_type="event")
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "url: must be an http:// or https:// URL" in page
    assert "methd: is not a known setting" in page
    assert "is required for an event trigger" in page
    formset = response.context["inline_admin_formsets"][0].formset
    assert formset.forms[1].errors["config"] == [
        "url: must be an http:// or https:// URL",
        "methd: is not a known setting; expected one of: base_delay, body, headers, max_attempts, method, url",
    ]
    assert "trigger_event" in response.context["adminform"].form.errors
    assert not Workflow.objects.exists()
    assert not WorkflowStep.objects.exists()


def test_save_and_publish_then_edit_the_draft(admin_client, account):
    steps = [{"action_type": "add_tag", "config": {"tag": "one"}}]
    response = admin_client.post(reverse("admin:workflows_workflow_add"), form_data(account, steps, _publish="1"))
    assert response.status_code == 302
    workflow = Workflow.objects.get()
    assert workflow.status == "active"
    assert workflow.current_version.number == 1
    existing = list(workflow.steps.all())
    changed = [
        {"action_type": "add_tag", "config": {"tag": "two"}},
        {"action_type": "send_sms", "config": {"body": "b"}},
    ]
    response = admin_client.post(
        reverse("admin:workflows_workflow_change", args=[workflow.pk]),
        form_data(account, changed, existing=existing),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow.refresh_from_db()
    assert [s.config for s in workflow.steps.all()] == [{"tag": "two"}, {"body": "b"}]
    assert workflow.current_version.steps == [{"name": "", "action_type": "add_tag", "config": {"tag": "one"}}]
    changelist = admin_client.get(reverse("admin:workflows_workflow_changelist"))
    assert changelist.status_code == 200
    response = admin_client.post(
        reverse("admin:workflows_workflow_changelist"), {"action": "publish", "_selected_action": [workflow.pk]}
    )
    assert response.status_code == 302
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 2


def test_publishing_an_empty_workflow_says_why(admin_client, account):
    workflow = make_workflow(account, [], publish=False)
    response = admin_client.post(
        reverse("admin:workflows_workflow_changelist"),
        {"action": "publish", "_selected_action": [workflow.pk]},
        follow=True,
    )
    assert "Not published: steps: a workflow needs at least one step to be published" in response.content.decode()


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_start_a_run_from_the_admin_and_watch_it(admin_client, account, contact):
    workflow = make_workflow(account, [{"name": "Tag", "action_type": "add_tag", "config": {"tag": "admin"}}])
    url = reverse("admin:workflows_workflow_start", args=[workflow.pk])
    assert admin_client.get(url).status_code == 200
    response = admin_client.post(url, {"contact": "nobody@example.com", "trigger_data": "{}"})
    assert "No contact with this id or email address" in response.content.decode()
    response = admin_client.post(url, {"contact": contact.email, "trigger_data": '{"plan": "pro"}'})
    run = WorkflowExecution.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:workflows_workflowexecution_change", args=[run.pk])
    assert run.trigger_source == "manual"
    assert run.context["trigger"] == {"plan": "pro"}
    run_due_jobs()
    page = admin_client.get(response["Location"]).content.decode()
    assert "completed" in page
    assert "add_tag" in page  # the log row, inline
    assert admin_client.get(reverse("admin:workflows_workflowexecution_changelist")).status_code == 200


def test_a_refused_start_shows_the_reason(admin_client, account, contact):
    account.max_concurrent_executions = 0
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    response = admin_client.post(
        reverse("admin:workflows_workflow_start", args=[workflow.pk]), {"contact": str(contact.pk)}
    )
    assert response.status_code == 200
    assert "its limit is 0" in response.content.decode()
    assert not WorkflowExecution.objects.exists()


def test_run_actions_call_the_services(admin_client, account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    run = ExecutionService().start(workflow_id=workflow.pk, contact_id=contact.pk).execution
    changelist = reverse("admin:workflows_workflowexecution_changelist")
    admin_client.post(changelist, {"action": "pause_runs", "_selected_action": [run.pk]})
    run.refresh_from_db()
    assert run.status == "paused"
    response = admin_client.post(changelist, {"action": "retry_runs", "_selected_action": [run.pk]}, follow=True)
    assert "cannot retry a run that is paused" in response.content.decode()
    admin_client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, "resume"]))
    run.refresh_from_db()
    assert run.status == "queued"
    admin_client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, "cancel"]))
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_a_viewer_may_watch_runs_but_not_move_them(client, account, contact):
    from django.contrib.auth.models import Permission

    from tests.factories import UserFactory

    viewer = UserFactory(is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_workflowexecution", "view_workflow"]))
    client.force_login(viewer)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    run = ExecutionService().start(workflow_id=workflow.pk, contact_id=contact.pk).execution
    assert client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).status_code == 200
    client.post(
        reverse("admin:workflows_workflowexecution_changelist"), {"action": "pause_runs", "_selected_action": [run.pk]}
    )
    client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, "cancel"]))
    assert client.get(reverse("admin:workflows_workflow_start", args=[workflow.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == "queued"
