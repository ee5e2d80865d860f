"""The admin: build a workflow with its steps, see errors on the fields they name, publish, start a run, watch it."""

import json

import pytest
from django.urls import reverse

from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
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
        data[f"steps-{index}-config_mode"] = "json"  # the builder's "advanced: edit as JSON" view
        data[f"steps-{index}-config_json"] = json.dumps(step.get("config", {}))
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
    assert "Is required for an event trigger" in page
    formset = response.context["inline_admin_formsets"][0].formset
    assert formset.forms[1].errors["config_json"] == [
        "url: must be an http:// or https:// URL",
        "methd: is not a known setting; expected one of: base_delay, body, headers, max_attempts, method, secrets, url",
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
    assert workflow.current_version.steps == [
        {"key": "step_1", "name": "", "action_type": "add_tag", "config": {"tag": "one"}}
    ]
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
    assert 'data-step-state="done"' in page  # the step on the run's timeline
    assert "succeeded" in page  # its attempt
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
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
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


@pytest.mark.parametrize(
    ("status", "buttons"),
    [
        ("queued", {"pause", "cancel"}),
        ("waiting", {"pause", "cancel"}),
        ("paused", {"resume", "cancel"}),
        ("failed", {"retry"}),
        ("completed", set()),
        ("cancelled", set()),
    ],
)
def test_a_runs_page_offers_the_moves_its_state_allows(admin_client, account, contact, status, buttons):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    WorkflowExecution.objects.filter(pk=run.pk).update(status=status)
    page = admin_client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).content.decode()
    offered = {
        move
        for move in ("pause", "resume", "retry", "cancel")
        if reverse("admin:workflows_workflowexecution_operate", args=[run.pk, move]) in page
    }
    assert offered == buttons


def test_a_viewer_may_watch_runs_but_not_move_them(client, account, contact):
    from django.contrib.auth.models import Permission

    from tests.factories import MembershipFactory, UserFactory

    viewer = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=viewer, role="viewer")
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_workflowexecution", "view_workflow"]))
    client.force_login(viewer)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    assert client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).status_code == 200
    client.post(
        reverse("admin:workflows_workflowexecution_changelist"), {"action": "pause_runs", "_selected_action": [run.pk]}
    )
    client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, "cancel"]))
    assert client.get(reverse("admin:workflows_workflow_start", args=[workflow.pk])).status_code == 302
    run.refresh_from_db()
    assert run.status == "queued"


# --- the account fence -------------------------------------------------------------------------
WEBHOOK = {
    "name": "Tell the shop",
    "action_type": "webhook",
    "config": {
        "url": "https://hooks.example.com/services/T0K3N?sig=querysecret",
        "headers": {"Authorization": "Bearer headersecret123"},
        "body": {"api_key": "bodysecret"},
    },
}


@pytest.fixture
def staff_of_a(client, account):
    """A staff user with every workflow, run and contact permission, but a member of `account` only."""
    from django.contrib.auth.models import Permission

    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=user, role="admin")
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["workflows", "contacts", "accounts", "jobs"])
    )
    client.force_login(user)
    return client


def test_a_staff_member_of_one_account_never_reaches_another_accounts_workflows(staff_of_a, account, other_account):
    from tests.factories import ContactFactory

    account.name, other_account.name = "Alpha Shop", "Bravo Bank"
    account.save()
    other_account.save()
    mine = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Alpha welcome")
    theirs = make_workflow(other_account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Bravo secret")
    my_contact = ContactFactory(account=account, email="a@alpha.example")
    their_contact = ContactFactory(account=other_account, email="b@bravo.example")

    page = staff_of_a.get(reverse("admin:workflows_workflow_changelist")).content.decode()
    assert "Alpha welcome" in page
    assert "Bravo secret" not in page
    assert "Bravo Bank" not in page  # not even in the account filter
    change = staff_of_a.get(reverse("admin:workflows_workflow_change", args=[theirs.pk]))
    assert change.status_code == 302
    assert change["Location"] == reverse("admin:index")
    edit = staff_of_a.post(reverse("admin:workflows_workflow_change", args=[theirs.pk]), form_data(other_account, []))
    assert edit.status_code == 302
    theirs.refresh_from_db()
    assert theirs.name == "Bravo secret"
    # Creating a workflow for an account one is not a member of: the account is not a choice.
    added = staff_of_a.post(reverse("admin:workflows_workflow_add"), form_data(other_account, [], name="Planted"))
    assert added.status_code == 200
    assert not Workflow.objects.filter(name="Planted").exists()

    start_theirs = reverse("admin:workflows_workflow_start", args=[theirs.pk])
    assert staff_of_a.get(start_theirs).status_code == 404
    assert staff_of_a.post(start_theirs, {"contact": str(their_contact.pk)}).status_code == 404
    start_mine = reverse("admin:workflows_workflow_start", args=[mine.pk])
    response = staff_of_a.post(start_mine, {"contact": str(their_contact.pk), "trigger_data": "{}"})
    assert "No contact with this id or email address" in response.content.decode()
    assert not WorkflowExecution.objects.exists()

    their_run = start_run(workflow_id=theirs.pk, contact_id=their_contact.pk).execution
    my_run = start_run(workflow_id=mine.pk, contact_id=my_contact.pk).execution
    runs = staff_of_a.get(reverse("admin:workflows_workflowexecution_changelist")).content.decode()
    assert str(my_run.pk) in runs
    assert str(their_run.pk) not in runs
    assert staff_of_a.get(reverse("admin:workflows_workflowexecution_change", args=[their_run.pk])).status_code == 302
    operate = reverse("admin:workflows_workflowexecution_operate", args=[their_run.pk, "cancel"])
    assert staff_of_a.post(operate).status_code == 404
    staff_of_a.post(
        reverse("admin:workflows_workflowexecution_changelist"),
        {"action": "cancel_runs", "_selected_action": [their_run.pk]},
    )
    their_run.refresh_from_db()
    assert their_run.status == "queued"

    contacts = staff_of_a.get(reverse("admin:contacts_contact_changelist")).content.decode()
    assert "a@alpha.example" in contacts
    assert "b@bravo.example" not in contacts
    accounts = staff_of_a.get(reverse("admin:accounts_account_changelist")).content.decode()
    assert "Alpha Shop" in accounts
    assert "Bravo Bank" not in accounts


def test_a_superuser_sees_every_account(admin_client, account, other_account):
    make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Alpha welcome")
    theirs = make_workflow(other_account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Bravo secret")
    page = admin_client.get(reverse("admin:workflows_workflow_changelist")).content.decode()
    assert "Alpha welcome" in page
    assert "Bravo secret" in page
    assert admin_client.get(reverse("admin:workflows_workflow_change", args=[theirs.pk])).status_code == 200
    assert admin_client.get(reverse("admin:workflows_workflow_start", args=[theirs.pk])).status_code == 200


def test_published_versions_show_webhook_credentials_redacted(admin_client, account):
    workflow = make_workflow(account, [WEBHOOK])
    page = admin_client.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content.decode()
    versions = page[page.index("versions-heading") :]
    assert "https://hooks.example.com/…" in versions
    assert "[redacted]" in versions
    for secret in ("T0K3N", "querysecret", "headersecret123", "bodysecret"):
        assert secret not in versions


def test_a_viewer_sees_the_draft_steps_with_webhook_credentials_redacted(client, account):
    from django.contrib.auth.models import Permission

    from tests.factories import MembershipFactory, UserFactory

    viewer = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=viewer, role="viewer")
    viewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_workflow", "view_workflowstep"]))
    client.force_login(viewer)
    workflow = make_workflow(account, [WEBHOOK], publish=False)
    page = client.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content.decode()
    assert "https://hooks.example.com/…" in page
    for secret in ("T0K3N", "querysecret", "headersecret123", "bodysecret"):
        assert secret not in page


def test_the_engine_extends_the_contacts_and_jobs_admin_from_ready_once():
    from contacts.admin import contact_page_panels
    from contacts.admin_imports import import_follow_ups
    from jobs.admin import job_links
    from workflows import admin_extensions

    admin_extensions.register()  # ready() did; again adds nothing
    assert contact_page_panels.count(admin_extensions.contact_runs_panel) == 1
    assert [follow_up.name for follow_up in import_follow_ups] == ["enroll"]
    assert job_links.count(admin_extensions.run_links) == 1


def test_a_contacts_page_lists_its_runs_and_a_step_jobs_page_links_to_its_run(admin_client, account, contact):
    from jobs.infrastructure.models import Job

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_page = reverse("admin:workflows_workflowexecution_change", args=[run.pk])
    contact_page = admin_client.get(reverse("admin:contacts_contact_change", args=[contact.pk])).content.decode()
    assert 'data-testid="contact-runs"' in contact_page
    assert run_page in contact_page
    job = Job.objects.get(payload__execution_id=str(run.pk))
    job_page = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert f'<a href="{run_page}">Run {run.pk}</a>' in job_page
