"""Every admin action and custom admin view, tried by a viewer, a marketer, an owner and a superuser.

The members hold *every* Django model permission of the project's apps, so what stops them is their role in
the account (`accounts/domain/roles.py`, the table the API obeys). An owner with only the `view_*` permissions
stands for the other half of the rule: Django's permission is needed too. Each case checks on the database
whether the action took effect, not only what the page said.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from accounts.admin_scoping import AccountScopedAdmin
from accounts.application.tokens import api_token_create
from accounts.models import Account, ApiToken
from contacts.models import Contact
from integrations.application.secrets import webhook_secret_get_or_create
from integrations.infrastructure.models import WebhookSigningSecret
from jobs.application.queue import enqueue
from jobs.models import Job
from tests.factories import ContactFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.operating import pause_run
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import Workflow, WorkflowExecution

pytestmark = pytest.mark.django_db

APPS = ["accounts", "contacts", "workflows", "jobs", "integrations"]
PERSONAS = ["viewer", "marketer", "owner", "view_only_owner", "superuser"]


@pytest.fixture
def login(client, account):
    def login(persona: str):
        user: Any
        if persona == "superuser":
            user = UserFactory(is_staff=True, is_superuser=True)
        else:
            user = UserFactory(is_staff=True)
            role = "owner" if persona == "view_only_owner" else persona
            MembershipFactory(account=account, user=user, role=role)
            granted = Permission.objects.filter(content_type__app_label__in=APPS)
            if persona == "view_only_owner":
                granted = granted.filter(codename__startswith="view_")
            user.user_permissions.add(*granted)
        client.force_login(user)
        return client

    return login


# --- the cases: make a row of `account`, act on it, tell whether it took effect --------------------------
def _token(account) -> ApiToken:
    owner = MembershipFactory.create(account=account, role="owner").user
    return api_token_create(user_id=owner.pk, account_id=account.pk)[0]


def _secret(account) -> WebhookSigningSecret:
    return webhook_secret_get_or_create(account_id=account.pk)


def _job(status: str) -> Callable[[Account], Job]:
    def make(account) -> Job:
        job = enqueue("noop", {}, account=account)
        Job.objects.filter(pk=job.pk).update(status=status)
        return job

    return make


def _workflow(status: str = "active") -> Callable[[Account], Workflow]:
    def make(account) -> Workflow:
        steps = [{"action_type": "add_tag", "config": {"tag": "x"}}]
        workflow = make_workflow(account, steps, publish=status != "draft")
        Workflow.objects.filter(pk=workflow.pk).update(status=status)
        return Workflow.objects.get(pk=workflow.pk)

    return make


def _run(status: str = "queued") -> Callable[[Account], WorkflowExecution]:
    def make(account) -> WorkflowExecution:
        workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
        run = start_run(workflow_id=workflow.pk, contact_id=ContactFactory.create(account=account).pk).execution
        if status == "paused":
            pause_run(execution_id=run.pk)
        elif status == "failed":
            WorkflowExecution.objects.filter(pk=run.pk).update(status="failed", completed_at=timezone.now())
        return run

    return make


def _status_is(expected: str) -> Callable[[Any], bool]:
    return lambda row: type(row).objects.get(pk=row.pk).status == expected


def _gone(row) -> bool:
    return not type(row).objects.filter(pk=row.pk).exists()


@dataclass
class Case:
    admin: str  # "app_model"
    action: str
    make: Callable[[Account], Any]
    done: Callable[[Any], Any]  # truthy when the action took effect
    allowed: set[str]


MANAGERS = {"owner", "superuser"}
MARKETERS = {"marketer", "owner", "superuser"}
OPERATORS = {"superuser"}

CASES = [
    Case("accounts_apitoken", "revoke_tokens", _token, lambda t: ApiToken.objects.get(pk=t.pk).revoked_at, MANAGERS),
    Case(
        "integrations_webhooksigningsecret",
        "rotate",
        _secret,
        lambda s: WebhookSigningSecret.objects.get(pk=s.pk).secret != s.secret,
        MANAGERS,
    ),
    Case("jobs_job", "retry_jobs", _job("dead"), _status_is("pending"), OPERATORS),
    Case("jobs_job", "cancel_jobs", _job("pending"), _status_is("cancelled"), OPERATORS),
    Case("workflows_workflow", "publish", _workflow("draft"), lambda w: w.versions.count() == 1, MARKETERS),
    Case("workflows_workflow", "pause", _workflow("active"), _status_is("paused"), MARKETERS),
    Case("workflows_workflow", "activate", _workflow("paused"), _status_is("active"), MARKETERS),
    Case("workflows_workflow", "archive", _workflow("active"), _status_is("archived"), MARKETERS),
    Case("workflows_workflow", "restore", _workflow("archived"), _status_is("draft"), MARKETERS),
    Case(
        "workflows_workflow",
        "start_run",
        _workflow("active"),
        lambda w: "/start/" in w.response_location,
        MARKETERS,
    ),
    Case("workflows_workflow", "delete_selected", _workflow("draft"), _gone, MARKETERS),
    Case("workflows_workflowexecution", "pause_runs", _run("queued"), _status_is("paused"), MARKETERS),
    Case("workflows_workflowexecution", "resume_runs", _run("paused"), _status_is("queued"), MARKETERS),
    Case("workflows_workflowexecution", "cancel_runs", _run("queued"), _status_is("cancelled"), MARKETERS),
    Case("workflows_workflowexecution", "retry_runs", _run("failed"), _status_is("queued"), MARKETERS),
    Case("contacts_contact", "delete_selected", lambda account: ContactFactory(account=account), _gone, MARKETERS),
    Case("accounts_account", "delete_selected", lambda account: account, _gone, OPERATORS),
    Case("jobs_job", "delete_selected", _job("completed"), _gone, OPERATORS),
    Case("accounts_apitoken", "delete_selected", _token, _gone, OPERATORS),
    Case("integrations_webhooksigningsecret", "delete_selected", _secret, _gone, OPERATORS),
]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.admin}.{c.action}")
def test_each_action_takes_effect_only_for_whoever_may(login, account, case, persona):
    row = case.make(account)
    client = login(persona)
    changelist = reverse(f"admin:{case.admin}_changelist")
    data = {"action": case.action, "_selected_action": [str(row.pk)]}
    if case.action == "delete_selected":
        data["post"] = "yes"  # the confirmation page's answer
    response = client.post(changelist, data)
    row.response_location = response.get("Location", "")
    assert response.status_code in (200, 302, 403)
    assert bool(case.done(row)) == (persona in case.allowed), response.content.decode()[:2000]


def test_every_action_of_every_admin_declares_a_permission_that_exists():
    """A new action without `permissions=` would run for anyone who sees the changelist: refused here and by
    `manage.py check` (accounts.E001)."""
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = UserFactory(is_staff=True, is_superuser=True)
    seen = 0
    for model, model_admin in admin.site._registry.items():
        for name, action in model_admin.get_actions(request).items():
            permissions = getattr(action.func, "allowed_permissions", ())
            assert permissions, f"{model.__name__} admin: action {name} declares no permission"
            for permission in permissions:
                assert hasattr(model_admin, f"has_{permission}_permission"), (model, name, permission)
                if isinstance(model_admin, AccountScopedAdmin) and permission != "view":
                    # Listed, or deliberately the superusers' alone (then never offered to staff).
                    assert permission in model_admin.account_roles or permission in ("delete", "operate"), (
                        model,
                        name,
                        permission,
                    )
            seen += 1
    assert seen >= len({(c.admin, c.action) for c in CASES})


def test_the_system_check_names_an_action_without_a_permission():
    class Careless(AccountScopedAdmin):
        actions = ["wipe"]

        @admin.action(description="Wipe")
        def wipe(self, request, queryset):
            queryset.delete()

    errors = Careless(Contact, admin.site).check()
    assert [e.id for e in errors] == ["accounts.E001"]
    assert "'wipe' declares no permission" in errors[0].msg


# --- custom views ------------------------------------------------------------------------------------
@pytest.mark.parametrize("persona", PERSONAS)
def test_start_a_run_view(login, account, persona):
    workflow = _workflow("active")(account)
    contact = ContactFactory(account=account)
    client = login(persona)
    client.post(reverse("admin:workflows_workflow_start", args=[workflow.pk]), {"contact": str(contact.pk)})
    assert WorkflowExecution.objects.filter(workflow=workflow).exists() == (persona in MARKETERS)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("operation", ["pause", "cancel"])
def test_operate_a_run_view(login, account, persona, operation):
    run = _run("queued")(account)
    client = login(persona)
    client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, operation]))
    expected = {"pause": "paused", "cancel": "cancelled"}[operation] if persona in MARKETERS else "queued"
    assert WorkflowExecution.objects.get(pk=run.pk).status == expected


# --- forms: the same rule on saves --------------------------------------------------------------------
@pytest.mark.parametrize("persona", PERSONAS)
def test_renaming_an_account(login, account, persona):
    client = login(persona)
    data = {
        "name": "Renamed",
        "slug": account.slug,
        "time_zone": account.time_zone,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
    }
    if persona == "superuser":
        data.update(max_concurrent_executions=account.max_concurrent_executions)
        data.update(max_concurrent_jobs=account.max_concurrent_jobs)
        data.update({"memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0"})
    client.post(reverse("admin:accounts_account_change", args=[account.pk]), data)
    account.refresh_from_db()
    assert (account.name == "Renamed") == (persona in MANAGERS)


@pytest.mark.parametrize("persona", PERSONAS)
def test_adding_a_contact(login, account, persona):
    client = login(persona)
    data = {
        "account": account.pk,
        "email": "new@example.com",
        "phone": "",
        "first_name": "",
        "last_name": "",
        "custom_fields": "{}",
        "tags": "[]",
        "consent_changes-TOTAL_FORMS": "0",
        "consent_changes-INITIAL_FORMS": "0",
    }
    client.post(reverse("admin:contacts_contact_add"), data)
    assert Contact.objects.filter(email="new@example.com").exists() == (persona in MARKETERS)


def test_a_member_in_two_roles_acts_only_where_the_role_allows(client, account, other_account):
    """Owner of one account, viewer of another: one selection across both revokes only the first's token."""
    user = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=user, role="owner")
    MembershipFactory(account=other_account, user=user, role="viewer")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=APPS))
    mine, theirs = _token(account), _token(other_account)
    client.force_login(user)
    response = client.post(
        reverse("admin:accounts_apitoken_changelist"),
        {"action": "revoke_tokens", "_selected_action": [str(mine.pk), str(theirs.pk)]},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert "1 token(s) revoked." in messages
    assert any("1 selected row(s) belong to accounts where your role does not allow this" in m for m in messages)
    assert ApiToken.objects.get(pk=mine.pk).revoked_at is not None
    assert ApiToken.objects.get(pk=theirs.pk).revoked_at is None


@pytest.mark.parametrize("persona", ["viewer", "marketer"])
def test_a_viewer_with_every_permission_still_sees_draft_webhook_secrets_redacted(login, account, persona):
    """Whoever may only look at a workflow sees its draft steps through the API's redaction: the role decides."""
    from tests.integration.workflows.test_admin import WEBHOOK

    workflow = make_workflow(account, [WEBHOOK], publish=False)
    page = login(persona).get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content.decode()
    assert ("headersecret123" in page) == (persona == "marketer")


# --- the builder's pages (issue #12), under the same rule ---------------------------------------------
@pytest.mark.parametrize("persona", PERSONAS)
def test_bulk_tagging_contacts(login, account, persona):
    contact = ContactFactory(account=account)
    client = login(persona)
    data = {"action": "add_tag", "_selected_action": [str(contact.pk)], "apply": "1", "tag": "vip"}
    client.post(reverse("admin:contacts_contact_changelist"), data)
    assert ("vip" in Contact.objects.get(pk=contact.pk).tags) == (persona in MARKETERS)


def _marketer_here_viewer_there(client, account, other_account):
    user = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=user, role="marketer")
    MembershipFactory(account=other_account, user=user, role="viewer")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=APPS))
    client.force_login(user)
    return client


def test_an_import_goes_only_into_an_account_where_the_role_manages_contacts(client, account, other_account):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from contacts.infrastructure.models import ContactImport

    client = _marketer_here_viewer_there(client, account, other_account)
    form = client.get(reverse("admin:contacts_contact_import")).context["form"]
    assert list(form.fields["account"].queryset) == [account]
    for target in (other_account, account):
        upload = SimpleUploadedFile("list.csv", b"Email\nada@example.com\n")
        client.post(reverse("admin:contacts_contact_import"), {"account": target.pk, "file": upload})
    assert list(ContactImport.objects.values_list("account_id", flat=True)) == [account.pk]


def test_a_test_send_needs_a_role_that_builds_workflows_in_the_posted_account(client, account, other_account):
    client = _marketer_here_viewer_there(client, account, other_account)
    statuses = {}
    for target in (account, other_account):
        send = {"account": target.pk, "step_prefix": "steps-0", "steps-0-action_type": "send_email", "to": "a@b.c"}
        statuses[target.name] = client.post(reverse("admin:workflows_workflow_send_test"), send).status_code
    assert statuses == {account.name: 400, other_account.name: 403}  # 400: the step is incomplete


@pytest.mark.parametrize("persona", ["marketer", "owner"])
def test_the_dashboard_and_a_runs_page_show_jobs_only_to_a_role_that_may_see_jobs(login, account, persona):
    """Every persona here holds `jobs.view_job`; only the owner's role holds VIEW_JOBS (as on the jobs pages)."""
    run = _run("queued")(account)
    client = login(persona)
    data = client.get(reverse("admin:relay_dashboard")).context["data"]
    assert data.runs_per_hour.total("queued") == 1  # runs: every role of the account
    assert (data.jobs_by_status.get("pending", 0) == 1) == (persona == "owner")
    page = client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk])).content.decode()
    assert ("Jobs that carried this run" in page) == (persona == "owner")
