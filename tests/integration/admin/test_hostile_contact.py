"""Every page that shows a contact's data, walked with a contact made of markup (names, email, custom fields
and their names, tags; a webhook's answer and an import file built from the same): each page shows the values,
and none of them becomes an element or an attribute. As a superuser (every page) and as a viewer (the
read-only pages)."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from contacts.infrastructure.models import ContactImport
from integrations.application.unsubscribe import unsubscribe_token
from jobs.application.queue import enqueue
from jobs.infrastructure.models import Job
from tests.factories import MembershipFactory, UserFactory
from tests.integration.workflows.support import WebhookServer, make_workflow, run_due_jobs
from tests.support import hostile
from workflows.admin_roles import grant_role
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)  # the run, the job and the import's check run as jobs

IMPORT_NAME = '"><img src=x onerror=alert(7) data-pwned=filename>.csv'
IMPORT_FILE = (
    f'email,"{hostile.CUSTOM_KEY.replace("key", "header")}"\n'
    '"<b data-pwned=cell>not an email","<img src=x onerror=alert(7) data-pwned=cell>"\n'
).encode()


@pytest.fixture
def world(account, settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    server = WebhookServer(answers=[(200, {}, hostile.WEBHOOK_ANSWER)]).start()
    try:
        contact = hostile.hostile_contact(account)
        steps = [
            {
                "key": "hook",
                "action_type": "webhook",
                "config": {"url": f"{server.url}/echo", "method": "POST", "body": {"name": "{{ contact.first_name }}"}},
            },
            {
                "key": "decide",
                "action_type": "branch",
                "config": {
                    "branches": [
                        {
                            "name": "Tagged",
                            "conditions": [{"field": "tags", "op": "contains", "value": hostile.TAG}],
                            "next": "mail",
                        }
                    ],
                    "default": "$end",
                },
            },
            {
                "key": "mail",
                "action_type": "send_email",
                "config": {"subject": "Hi {{ contact.first_name }}", "text": "Hi {{ contact.first_name }}"},
            },
        ]
        workflow = make_workflow(account, steps, name="Welcome")
        run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
        run_due_jobs(50)
    finally:
        server.stop()
    job = enqueue(
        "send_email",
        {"to": contact.email, "subject": contact.first_name, "text": contact.last_name, "account": account.pk},
        account=account,
    )
    Job.objects.filter(pk=job.id).update(error_message=f"ValidationFailure: to: {contact.email} is no address")
    run.refresh_from_db()
    assert run.status in ("completed", "failed"), run.status
    return {"contact": contact, "workflow": workflow, "run": run, "job": Job.objects.get(pk=job.id)}


def _as(client, account, role):
    if role == "superuser":
        user = UserFactory(is_superuser=True, is_staff=True)
    else:
        user = UserFactory()
        MembershipFactory(account=account, user=user, role=role)
        grant_role(user, role)
    client.force_login(user)
    return user


def _pages(world):
    contact, workflow, run = world["contact"], world["workflow"], world["run"]
    changelist = reverse("admin:contacts_contact_changelist")
    # page -> the hostile values it must show (as text)
    return {
        reverse("admin:index"): {"email"},  # recent actions
        changelist: {"email", "first_name", "last_name", "tag"},
        changelist + "?" + _query(q=hostile.FIRST_NAME): {"first_name"},
        changelist + "?" + _query(tag=hostile.TAG): {"tag", "email"},
        reverse("admin:contacts_contact_change", args=[contact.pk]): hostile.EVERY_FIELD,
        reverse("admin:contacts_contact_history", args=[contact.pk]): {"email"},
        reverse("admin:workflows_workflow_change", args=[workflow.pk]): {"tag", "email", "key"},
        reverse("admin:workflows_workflow_versions", args=[workflow.pk]): set(),
        reverse("admin:workflows_workflow_stats", args=[workflow.pk]): set(),
        reverse("admin:workflows_workflow_start", args=[workflow.pk]): set(),
        reverse("admin:workflows_workflowexecution_changelist"): {"email"},
        reverse("admin:workflows_workflowexecution_change", args=[run.pk]): {"email", "response", "tag"},
        reverse("admin:jobs_job_changelist"): set(),
        reverse("admin:jobs_job_change", args=[world["job"].pk]): {"first_name", "last_name", "email"},
        reverse("admin:relay_dashboard"): set(),
        reverse("admin:contacts_contact_import"): set(),
    }


def _query(**params):
    from urllib.parse import urlencode

    return urlencode(params)


def _check(page: str, url: str, must_show: set[str]) -> None:
    assert hostile.injected(page) == [], url
    missing = must_show - hostile.shown(page)
    assert not missing, f"{url} does not show {sorted(missing)}: the walk would prove nothing there"


@pytest.mark.parametrize("role", ["superuser", "viewer"])
def test_every_page_shows_a_hostile_contact_as_text(client, account, world, role):
    user = _as(client, account, role)
    LogEntry.objects.log_actions(user.pk, [world["contact"]], CHANGE, change_message="Changed first name.")
    unreached = []
    for url, must_show in _pages(world).items():
        response = client.get(url)
        if response.status_code != 200:
            unreached.append(url)
            continue
        _check(response.content.decode(), url, must_show)
    workflow, job = world["workflow"], world["job"]
    assert unreached == (
        []
        if role == "superuser"
        else [  # what a viewer does not reach: starting runs, the queue, the dashboard, the import
            reverse("admin:workflows_workflow_start", args=[workflow.pk]),
            reverse("admin:jobs_job_changelist"),
            reverse("admin:jobs_job_change", args=[job.pk]),
            reverse("admin:relay_dashboard"),
            reverse("admin:contacts_contact_import"),
        ]
    )
    # The bulk tag page names the selected contacts; the delete page too.
    changelist = reverse("admin:contacts_contact_changelist")
    if role == "superuser":
        page = client.post(changelist, {"action": "add_tag", "_selected_action": [world["contact"].pk]})
        _check(page.content.decode(), "add_tag", {"email"})
        page = client.get(reverse("admin:contacts_contact_delete", args=[world["contact"].pk]))
        _check(page.content.decode(), "delete", {"email"})


def test_the_builder_preview_answers_data_not_markup(client, account, world):
    """No contact typed: the newest, the hostile one. The answer is JSON whose texts are the characters typed."""
    _as(client, account, "viewer")
    data = {
        "account": account.pk,
        "step_prefix": "steps-0",
        "steps-0-action_type": "send_email",
        "steps-0-config_mode": "form",
        "steps-0-send_email-subject": "Hi {{ contact.first_name }}",
        "steps-0-send_email-text": "{{ contact.last_name }} {{ contact.custom_fields.plan }} {{ contact.tags.0 }}",
        "steps-0-send_email-html": "<p>{{ contact.first_name }}</p>",
    }
    response = client.post(reverse("admin:workflows_workflow_preview"), data)
    assert response["Content-Type"] == "application/json"
    preview = json.loads(response.content)["preview"]
    assert preview["subject"] == f"Hi {hostile.FIRST_NAME}"
    assert preview["text"] == f"{hostile.LAST_NAME} {hostile.PLAN} {hostile.TAG}"
    assert preview["contact_label"] == hostile.EMAIL
    assert hostile.injected(preview["html"]) == []
    assert hostile.shown(preview["html"]) == {"first_name"}


def test_an_import_of_hostile_cells_shows_them_as_text(client, account):
    _as(client, account, "superuser")
    response = client.post(
        reverse("admin:contacts_contact_import"),
        {"account": account.pk, "file": SimpleUploadedFile(IMPORT_NAME, IMPORT_FILE)},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    record = ContactImport.objects.latest("pk")
    detail = reverse("admin:contacts_contact_import_detail", args=[record.pk])
    _check(client.get(detail).content.decode(), "import mapping", {"filename", "header", "cell"})
    mapping = {f"column_{i}": target for i, target in enumerate(record.mapping)}
    client.post(detail, {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", **mapping})
    run_due_jobs(20)
    record.refresh_from_db()
    assert record.status == "refused", record.status
    _check(client.get(detail).content.decode(), "import refused", {"filename", "header", "cell"})
    _check(client.get(reverse("admin:contacts_contact_import")).content.decode(), "recent imports", {"filename"})


def test_the_unsubscribe_pages_show_the_address_as_text(client, account):
    contact = hostile.hostile_contact(account)
    url = reverse("integrations:unsubscribe", args=[unsubscribe_token(contact.pk)])
    for response in (client.get(url), client.post(url)):
        assert response.status_code == 200
        assert hostile.injected(response.content.decode()) == []
    assert WorkflowExecution.objects.count() == 0
