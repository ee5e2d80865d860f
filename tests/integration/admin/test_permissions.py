"""Every page and action the builder and the dashboard add, run by each role: marketer, viewer, operator,
and a member of another account. Checked on the server: a refused action changes nothing."""

import pytest
from django.contrib import admin
from django.urls import reverse

from contacts.application.services import contact_create
from contacts.infrastructure.models import Contact
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from workflows.admin_roles import grant_role
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(account):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Mine")
    contact = contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    other = AccountFactory()
    theirs = make_workflow(other, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Theirs")
    their_contact = contact_create(account_id=other.pk, email="bob@example.com", first_name="Bob", phone="")
    return {"workflow": workflow, "contact": contact, "run": run, "theirs": theirs, "their_contact": their_contact}


def as_role(client, account, role):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="viewer" if role == "operator" else role)
    grant_role(user, role)
    client.force_login(user)
    return client


def pages(world):
    w, r = world["workflow"], world["run"]
    return {
        "builder": reverse("admin:workflows_workflow_change", args=[w.pk]),
        "versions": reverse("admin:workflows_workflow_versions", args=[w.pk]),
        "stats": reverse("admin:workflows_workflow_stats", args=[w.pk]),
        "run": reverse("admin:workflows_workflowexecution_change", args=[r.pk]),
        "contact": reverse("admin:contacts_contact_change", args=[world["contact"].pk]),
        "export": reverse("admin:contacts_contact_export"),
        "dashboard": reverse("admin:relay_dashboard"),
    }


@pytest.mark.parametrize(
    ("role", "reachable"),
    [
        ("marketer", {"builder", "versions", "stats", "run", "contact", "export"}),
        ("viewer", {"builder", "versions", "stats", "run", "contact"}),  # an export is not a viewer's
        ("operator", {"builder", "versions", "stats", "run", "contact", "dashboard"}),
    ],
)
def test_who_reaches_which_page(client, account, world, role, reachable):
    as_role(client, account, role)
    for name, url in pages(world).items():
        status = client.get(url).status_code
        assert (status == 200) == (name in reachable), (role, name, status)


def test_a_viewer_sees_the_builder_read_only_and_changes_nothing(client, account, world):
    as_role(client, account, "viewer")
    page = client.get(pages(world)["builder"]).content.decode()
    assert "data-add-step" not in page
    assert "Save and publish" not in page
    workflow, contact = world["workflow"], world["contact"]
    client.post(
        reverse("admin:workflows_workflow_changelist"), {"action": "publish", "_selected_action": [workflow.pk]}
    )
    client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "add_tag", "_selected_action": [contact.pk], "apply": "1", "tag": "vip"},
    )
    client.post(
        reverse("admin:workflows_workflowexecution_changelist"),
        {"action": "cancel_runs", "_selected_action": [world["run"].pk]},
    )
    send = {"account": account.pk, "step_prefix": "steps-0", "steps-0-action_type": "send_email", "to": "a@b.c"}
    assert client.post(reverse("admin:workflows_workflow_send_test"), send).status_code == 403
    contact.refresh_from_db()
    assert contact.tags == []
    assert WorkflowExecution.objects.get(pk=world["run"].pk).status == "queued"
    assert workflow.versions.count() == 1


def test_a_marketer_builds_publishes_tags_and_steers_runs(client, account, world):
    as_role(client, account, "marketer")
    contact = world["contact"]
    response = client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "add_tag", "_selected_action": [contact.pk], "apply": "1", "tag": "VIP"},
        follow=True,
    )
    assert "Tag “vip” added to 1 contact(s)" in response.content.decode()
    contact.refresh_from_db()
    assert contact.tags == ["vip"]
    response = client.post(
        reverse("admin:workflows_workflowexecution_changelist"),
        {"action": "pause_runs", "_selected_action": [world["run"].pk]},
        follow=True,
    )
    assert "1 run(s) paused." in response.content.decode()
    response = client.post(
        reverse("admin:workflows_workflowexecution_changelist"),
        {"action": "retry_runs", "_selected_action": [world["run"].pk]},
        follow=True,
    )
    assert "0 run(s) retried. 1 not: cannot retry a run that is paused" in response.content.decode()
    assert client.get(pages(world)["dashboard"]).status_code in (302, 403)


def test_nothing_crosses_accounts(client, account, world):
    as_role(client, account, "operator")
    theirs, their_contact = world["theirs"], world["their_contact"]
    for url in (
        reverse("admin:workflows_workflow_versions", args=[theirs.pk]),
        reverse("admin:workflows_workflow_stats", args=[theirs.pk]),
    ):
        assert client.get(url).status_code == 404
    dashboard = client.get(reverse("admin:relay_dashboard")).content.decode()
    assert their_contact.account.name not in dashboard
    preview = {"account": their_contact.account_id, "step_prefix": "steps-0", "steps-0-action_type": "send_email"}
    assert client.post(reverse("admin:workflows_workflow_preview"), preview).status_code == 404
    client.logout()
    as_role(client, account, "marketer")
    client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "add_tag", "_selected_action": [their_contact.pk], "apply": "1", "tag": "vip"},
    )
    assert Contact.objects.get(pk=their_contact.pk).tags == []
    export = b"".join(client.get(reverse("admin:contacts_contact_export")).streaming_content).decode()
    assert "ada@example.com" in export
    assert "bob@example.com" not in export


def test_every_action_and_custom_view_declares_its_permission():
    """A new admin action must say who may run it; custom views check it inside (tested above)."""
    from contacts.admin import ContactAdmin
    from workflows.admin import WorkflowAdmin, WorkflowExecutionAdmin

    for model_admin in (ContactAdmin, WorkflowAdmin, WorkflowExecutionAdmin):
        instance = model_admin(model_admin.__dict__.get("model") or _model_of(model_admin), admin.site)
        for name in instance.actions:
            action = getattr(instance, name)
            assert getattr(action, "allowed_permissions", None), f"{model_admin.__name__}.{name} declares none"


def _model_of(model_admin):
    return next(model for model, registered in admin.site._registry.items() if type(registered) is model_admin)


def test_bulk_tagging_leaves_a_contact_that_has_every_tag_it_may_hold_and_says_so(client, account, world):
    from contacts.domain.model import MAX_TAGS

    as_role(client, account, "marketer")
    full = contact_create(account_id=account.pk, email="full@example.com", tags=[f"t{i}" for i in range(MAX_TAGS)])
    response = client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "add_tag", "_selected_action": [world["contact"].pk, full.pk], "apply": "1", "tag": "vip"},
        follow=True,
    )
    page = response.content.decode()
    assert "Tag “vip” added to 1 contact(s)." in page
    assert f"1 not: a contact has at most {MAX_TAGS} tags" in page
    assert Contact.objects.get(pk=world["contact"].pk).tags == ["vip"]
    assert len(Contact.objects.get(pk=full.pk).tags) == MAX_TAGS


def _branch_post(account, workflow):
    from tests.integration.admin.test_builder import page_data

    steps = [
        ("add_tag", {"tag": "x"}),
        (
            "branch",
            {
                "branches-0-name": "VIP",
                "branches-0-when-field": ["tags"],
                "branches-0-when-path": [""],
                "branches-0-when-op": ["contains"],
                "branches-0-when-value": ["vip"],
                "branches-0-next": "$end",
                "default": "done",
            },
        ),
        ("end", {}),
    ]
    data = page_data(account, steps, existing=list(workflow.steps.order_by("position")), name=workflow.name)
    data.update({"steps-0-key": "step_1", "steps-1-key": "check", "steps-2-key": "done"})
    return data


@pytest.mark.parametrize(("role", "may"), [("marketer", True), ("viewer", False), ("operator", False)])
def test_each_role_building_a_branch_and_a_goal_met_count(client, account, world, role, may):
    """The builder's deciding steps are saved by whoever may change the workflow, checked on the server."""
    workflow = world["workflow"]
    as_role(client, account, role)
    url = reverse("admin:workflows_workflow_change", args=[workflow.pk])
    response = client.post(url, _branch_post(account, workflow))
    kinds = list(workflow.steps.order_by("position").values_list("action_type", flat=True))
    if may:
        assert response.status_code == 302, response.content.decode()[:2000]
        assert kinds == ["add_tag", "branch", "end"]
    else:
        assert response.status_code == 403
        assert kinds == ["add_tag"]
    stats = client.get(reverse("admin:workflows_workflow_stats", args=[workflow.pk]))
    assert stats.status_code == 200  # every role may read the numbers (met their goal, which way they went)
    assert 'data-testid="met-goal"' in stats.content.decode()


def test_a_member_of_another_account_cannot_build_on_its_workflows(client, account, world):
    theirs = world["theirs"]
    as_role(client, world["their_contact"].account, "marketer")  # a marketer, but of the other account
    client.logout()
    as_role(client, account, "marketer")
    url = reverse("admin:workflows_workflow_change", args=[theirs.pk])
    assert client.post(url, _branch_post(theirs.account, theirs)).status_code in (302, 404)
    assert list(theirs.steps.values_list("action_type", flat=True)) == ["add_tag"]


@pytest.mark.django_db(transaction=True)
def test_migrate_brings_existing_role_groups_up_to_the_table():
    """An install whose groups predate a permission (export came in a later release) gets it at `migrate`."""
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from workflows.admin_roles import ADMIN_ROLE_PERMISSIONS, GROUP_NAMES

    marketer = Group.objects.get(name=GROUP_NAMES["marketer"])  # the test database's migrate made it
    marketer.permissions.remove(*marketer.permissions.filter(codename="export_contact"))
    assert not marketer.permissions.filter(codename="export_contact").exists()

    call_command("migrate", verbosity=0)

    assert marketer.permissions.filter(codename="export_contact").exists()
    assert marketer.permissions.count() == len(ADMIN_ROLE_PERMISSIONS["marketer"])
