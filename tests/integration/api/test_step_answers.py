"""A webhook step's answer: conditions and templates read it as the receiver sent it, while everything that
shows it (the stored log, the API, the admin, the process's log) shows it with the request's credentials cut
out. A real local HTTP receiver, the engine's own jobs, the API and the admin as a browser asks for them.

docs/decisions/secrets-and-step-output.md
"""

import json
import logging

import pytest
from django.urls import reverse

from contacts.infrastructure.models import Contact
from tests.factories import ContactFactory
from tests.integration.workflows.support import WebhookServer, make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

AUTH = "hdr7Q2xZ9kLm4VwAuth"  # the Authorization header's credential
TOKEN = "qry5Jk2Pp8Rt6TokN"  # ?token=
BODY_KEY = "bdy3Nn8Vv1Cc4Key"  # {"api_key": ...} in the request body
TENANT = "tnt6Hh2Gg9Ff3Ten"  # a header value the step marks secret
SECRETS = (AUTH, TOKEN, BODY_KEY, TENANT)


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    server = WebhookServer().start()
    # What a careless receiver does: it answers the data asked for, and repeats the credentials it was sent.
    answer = {
        "tier": "gold",
        "shop": "store-seven",
        "seen": AUTH,
        "echo": {"authorization": f"Bearer {AUTH}", "query": f"tier=gold&token={TOKEN}", "body_key": BODY_KEY},
        "tenant_seen": TENANT,
        "portal": "https://portal.example.com/c/42?lang=fr",
    }
    server.answers = [(200, {}, json.dumps(answer))]
    yield server
    server.stop()


def workflow_for(account, receiver):
    call = {
        "key": "call",
        "action_type": "webhook",
        "config": {
            "url": f"{receiver.url}/plan?tier=gold&token={TOKEN}",
            "headers": {"Authorization": f"Bearer {AUTH}", "X-Tenant": TENANT, "X-Shop": "store-seven"},
            "body": {"contact": "{{ contact.id }}", "api_key": BODY_KEY},
            "secrets": ["X-Tenant"],
        },
    }
    check = {
        "key": "check",
        "action_type": "branch",
        "config": {
            "branches": [
                {  # never holds; it is here so that the decision logs the value it read
                    "name": "Leaked",
                    "conditions": [{"field": "steps.call.body.seen", "op": "equals", "value": "nothing"}],
                    "next": "default",
                },
                {
                    "name": "Gold",
                    "conditions": [
                        {"field": "steps.call.body.tier", "op": "equals", "value": "gold"},
                        # a URL in an answer is read whole, not cut to its host as the shown copy cuts it
                        {
                            "field": "steps.call.body.portal",
                            "op": "equals",
                            "value": "https://portal.example.com/c/42?lang=fr",
                        },
                    ],
                    "next": "gold",
                },
            ],
            "default": "default",
        },
    }
    gold = {"key": "gold", "action_type": "add_tag", "config": {"tag": "{{ steps.0.json.tier }}"}, "next": "$end"}
    default = {"key": "default", "action_type": "add_tag", "config": {"tag": "default-path"}}
    return make_workflow(account, [call, check, gold, default])


def assert_no_secret(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} in {where}"


def test_a_branch_reads_the_answer_as_sent_and_no_secret_is_shown_anywhere(
    receiver, account, owner_api, client, superuser, caplog
):
    caplog.set_level(logging.DEBUG)
    contact = ContactFactory(account=account)
    workflow = workflow_for(account, receiver)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run = WorkflowExecution.objects.get(pk=run.pk)

    (request,) = receiver.received
    assert request.path == f"/plan?tier=gold&token={TOKEN}"  # the receiver was asked ?tier=gold
    assert request.headers["Authorization"] == f"Bearer {AUTH}"

    # The decision read what the receiver sent: the gold path, and the template filled in "gold".
    assert run.status == "completed", run.last_error
    assert set(Contact.objects.get(pk=contact.pk).tags) == {"gold"}
    logs = list(ExecutionLog.objects.filter(execution=run).order_by("id"))
    assert [row.step_key for row in logs] == ["call", "check", "gold"]
    decision = logs[1].decision
    assert decision["branch"] == "Gold"
    assert decision["values"] == {  # as the call's log row shows the answer
        "steps.call.body.seen": "[redacted]",
        "steps.call.body.tier": "gold",
        "steps.call.body.portal": "https://portal.example.com",
    }

    # The shown copy keeps the data (tier, shop) and cuts every credential, including the one marked secret.
    shown = logs[0].response_data
    assert shown["json"]["tier"] == "gold"
    assert shown["json"]["shop"] == "store-seven"
    assert shown["json"]["seen"] == "[redacted]"
    stored = json.dumps([(r.response_data, r.decision, r.error_details) for r in logs])
    assert_no_secret("the stored log", stored)
    assert_no_secret("the stored run's errors", f"{run.last_error} {run.end_reason}")

    # The API: the run, its logs, the workflow's steps.
    for path in (
        f"/api/v1/executions/{run.pk}",
        f"/api/v1/executions/{run.pk}/logs",
        f"/api/v1/workflows/{workflow.pk}",
        f"/api/v1/workflows/{workflow.pk}/executions",
    ):
        answer = owner_api.get(path)
        assert answer.status_code == 200, (path, answer.content[:300])
        assert_no_secret(path, answer.content.decode())
    assert '"tier": "gold"' in json.dumps(owner_api.get(f"/api/v1/executions/{run.pk}/logs").json())

    # The admin's run page (timeline, attempts, details) and its list.
    client.force_login(superuser)
    page = client.get(reverse("admin:workflows_workflowexecution_change", args=[run.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert_no_secret("the admin's run page", html)
    assert "gold" in html
    listing = client.get(reverse("admin:workflows_workflowexecution_changelist"))
    assert_no_secret("the admin's runs list", listing.content.decode())

    # Nothing the process logged.
    assert_no_secret("the process's log", caplog.text)


def test_an_unmarked_header_value_is_data_and_stays_in_the_shown_answer(receiver, account):
    contact = ContactFactory(account=account)
    run = start_run(workflow_id=workflow_for(account, receiver).pk, contact_id=contact.pk).execution
    run_due_jobs()
    call = ExecutionLog.objects.get(execution_id=run.pk, step_key="call")
    assert call.response_data["json"]["shop"] == "store-seven"  # X-Shop: store-seven was sent, and is no secret
    assert call.response_data["json"]["tenant_seen"] == "[redacted]"  # X-Tenant is: the step marks it so
