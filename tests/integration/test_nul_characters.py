"""A NUL character from outside, on every way in (issue 21, item 9): a clear 400 or a form error naming the field,
never a 500 (PostgreSQL's text and jsonb refuse U+0000), and nothing half-written. SQLite would store it: the
same refusals hold there, so the data does not depend on the database.

The ways in, and the one check each kind has (kernel/storable_text.py):
- form fields, query parameters and paths outside the API: `RefuseNulMiddleware`
  (the provider webhooks, the unsubscribe page, every admin form, list filter and action);
- JSON in the admin (a step's webhook body, a step in JSON mode, a run's trigger data) and from the API:
  `find_unstorable`, in the workflow definition's and the trigger data's own checks and in the API's parser;
- the API's JSON bodies, query parameters, path segments and headers: its parser, filters, converters and key
  checks (tests/integration/api/test_nul_characters.py);
- a file's cells: the import's reader (tests/integration/admin/test_contacts_import_files.py);
- what a webhook receiver answers: kept with U+FFFD for each NUL, not refused
  (tests/integration/workflows/test_unstorable_outcomes.py).
"""

from __future__ import annotations

import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from contacts.models import ConsentChange, Contact, ContactImport, Event
from integrations.infrastructure.models import InboundSmsMessage
from integrations.infrastructure.twilio import twilio_signature
from tests.factories import ContactFactory
from tests.integration.admin.test_builder import page_data
from tests.integration.workflows.support import make_workflow
from workflows.infrastructure.models import Workflow, WorkflowExecution

pytestmark = pytest.mark.django_db

NUL = "\x00"


def assert_refused(response, where: str) -> None:
    """The middleware's answer: 400, plain text naming where the NUL is."""
    assert response.status_code == 400, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode() == f"{where} contains a NUL character (a zero byte), which cannot be stored."


# --- provider webhooks and public pages --------------------------------------------------------
SMS_TOKEN = "inbound-auth-token-3c1d"


@pytest.mark.parametrize("field", ["Body", "From", "To", "MessageSid"])
def test_a_signed_inbound_sms_with_a_nul_is_refused_and_records_nothing(settings, field):
    settings.TWILIO_AUTH_TOKEN = SMS_TOKEN
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    contact = ContactFactory()
    params = {"From": contact.phone, "To": "+15550100000", "Body": "thanks!", "MessageSid": "SM" + uuid.uuid4().hex}
    params[field] = params[field][:3] + NUL + params[field][3:]
    signature = twilio_signature(
        SMS_TOKEN, "https://relay.example/hooks/twilio/sms/", {k: [v] for k, v in params.items()}
    )
    response = Client().post("/hooks/twilio/sms/", params, headers={"X-Twilio-Signature": signature})
    assert_refused(response, f"The form field “{field}”")
    assert not InboundSmsMessage.objects.exists()
    assert not Event.objects.exists()
    assert not ConsentChange.objects.exists()


def test_the_same_sms_with_a_nul_in_a_stop_keyword_is_refused_too(settings):
    settings.TWILIO_AUTH_TOKEN = SMS_TOKEN
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    contact = ContactFactory()
    params = {"From": contact.phone, "To": "+15550100000", "Body": "STOP" + NUL, "MessageSid": "SM1"}
    signature = twilio_signature(
        SMS_TOKEN, "https://relay.example/hooks/twilio/sms/", {k: [v] for k, v in params.items()}
    )
    assert_refused(
        Client().post("/hooks/twilio/sms/", params, headers={"X-Twilio-Signature": signature}), "The form field “Body”"
    )
    contact.refresh_from_db()
    assert not contact.sms_opted_out


@pytest.mark.parametrize(
    ("method", "url", "data", "where"),
    [
        ("post", "/unsubscribe/abc/", {"List-Unsubscribe": "One-Click" + NUL}, "The form field “List-Unsubscribe”"),
        ("get", "/unsubscribe/abc/?x=%00", None, "The query parameter “x”"),
        ("get", "/unsubscribe/a%00b/", None, "The address"),
        ("get", "/t/c/a%00b/", None, "The address"),
        ("get", "/t/o/abc/?utm%00=1", None, "The query parameter “utm\\u0000”"),  # a name is quoted printable
    ],
)
def test_public_pages(method, url, data, where):
    assert_refused(getattr(Client(), method)(url, data), where)


# --- the admin ---------------------------------------------------------------------------------
CHANGELISTS = [
    "contacts/contact",
    "jobs/job",
    "jobs/schedule",
    "workflows/workflow",
    "workflows/workflowexecution",
    "integrations/webhooksigningsecret",
    "accounts/account",
    "accounts/apitoken",
]


@pytest.mark.parametrize("changelist", CHANGELISTS)
@pytest.mark.parametrize("query", ["status=%00", "tags=%00", "q=a%00b", "o=%00", "account__id__exact=%00"])
def test_every_admin_list_filter_and_search(admin_client, changelist, query):
    """`?status=%00` reached PostgreSQL through the jobs', workflows' and runs' status filters, `?tags=%00` through
    the contacts' tag filter: each was a 500."""
    response = admin_client.get(f"/admin/{changelist}/?{query}")
    assert_refused(response, f"The query parameter “{query.split('=')[0]}”")


def test_an_admin_form_with_a_nul_saves_nothing(admin_client, account):
    response = admin_client.post(
        reverse("admin:contacts_contact_add"),
        {"account": account.pk, "email": "ada@example.com", "first_name": "A" + NUL, "tags": "", "custom_fields": "{}"},
    )
    assert_refused(response, "The form field “first_name”")
    assert not Contact.objects.exists()
    response = admin_client.post(reverse("admin:workflows_workflow_add"), page_data(account, [], name="W" + NUL))
    assert_refused(response, "The form field “name”")
    assert not Workflow.objects.exists()


def test_an_admin_action_with_a_nul(admin_client, account):
    contact = ContactFactory(account=account)
    response = admin_client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "add_tag", "_selected_action": [contact.pk], "tag": "vip" + NUL, "apply": "1"},
    )
    assert_refused(response, "The form field “tag”")
    contact.refresh_from_db()
    assert contact.tags == []


def test_an_admin_address_and_an_uploaded_files_name(admin_client, account):
    assert_refused(admin_client.get(f"/admin/contacts/contact/1{NUL}/change/"), "The address")
    # An uploaded file's name: Django's multipart parser drops its unprintable characters itself.
    upload = SimpleUploadedFile("list\x00.csv", b"email\nada@example.com\n")
    response = admin_client.post(reverse("admin:contacts_contact_import"), {"account": account.pk, "file": upload})
    assert response.status_code == 302
    assert ContactImport.objects.get().filename == "list.csv"


def test_the_login_page(client):
    response = client.post(reverse("admin:login"), {"username": "ad" + NUL + "min", "password": "x"})
    assert_refused(response, "The form field “username”")


WEBHOOK = {"method": "POST", "url": "https://hooks.example.com/relay", "headers-key": [""], "headers-value": [""]}


@pytest.mark.parametrize(
    "body",
    ['{"note": "a\\u0000b"}', '{"n\\u0000te": 1}', '{"items": [1, "\\u0000"]}'],
)
def test_a_json_escaped_nul_in_a_steps_webhook_body_is_an_error_on_the_step(admin_client, account, body):
    """Typed as JSON text, a NUL is six plain characters no middleware sees: the workflow's own check finds it.
    It was a 500 when the step's config reached jsonb."""
    steps = [("webhook", {**WEBHOOK, "body": body, "base_delay": "30"})]
    response = admin_client.post(reverse("admin:workflows_workflow_add"), page_data(account, steps))
    assert response.status_code == 200
    assert "contains a NUL character" in response.content.decode()
    assert not Workflow.objects.exists()


def test_a_json_escaped_nul_in_a_step_in_json_mode_is_an_error(admin_client, account):
    data = page_data(account, [("add_tag", {"tag": "x"})])
    data.update({"steps-0-config_mode": "json", "steps-0-config_json": '{"tag": "vip", "note": "\\u0000"}'})
    response = admin_client.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 200
    assert "contains a NUL character" in response.content.decode()
    assert not Workflow.objects.exists()


def test_a_json_escaped_nul_in_a_runs_trigger_data_starts_nothing(admin_client, account):
    contact = ContactFactory(account=account)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    response = admin_client.post(
        reverse("admin:workflows_workflow_start", args=[workflow.pk]),
        {"contact": contact.email, "trigger_data": '{"plan": "pro\\u0000"}'},
    )
    assert response.status_code == 200
    assert "trigger_data.plan: contains a NUL character" in response.content.decode()
    assert not WorkflowExecution.objects.exists()
