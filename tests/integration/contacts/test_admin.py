"""The contacts admin goes through the contact services: the same rules, the same events as the API."""

import pytest
from django.urls import reverse

from contacts.models import Contact
from jobs.models import Job
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def test_deleting_a_contact_in_the_admin_stops_its_runs(admin_client, account, contact):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    response = admin_client.post(reverse("admin:contacts_contact_delete", args=[contact.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Contact.objects.filter(pk=contact.pk).exists()
    assert not WorkflowExecution.objects.filter(pk=run.pk).exists()
    assert Job.objects.get(pk=run.next_job_id).status == "cancelled"  # the bare ORM delete left it queued


def test_deleting_contacts_in_bulk_in_the_admin_stops_their_runs(admin_client, account, contact):
    from tests.factories import ContactFactory

    other = ContactFactory(account=account)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    runs = [start_run(workflow_id=workflow.pk, contact_id=c.pk).execution for c in (contact, other)]
    response = admin_client.post(
        reverse("admin:contacts_contact_changelist"),
        {"action": "delete_selected", "_selected_action": [contact.pk, other.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Contact.objects.filter(pk__in=[contact.pk, other.pk]).exists()
    assert {Job.objects.get(pk=run.next_job_id).status for run in runs} == {"cancelled"}


def test_a_phone_that_is_no_phone_number_is_a_form_error(admin_client, account, contact):
    url = reverse("admin:contacts_contact_change", args=[contact.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    data = {
        "account": account.pk,
        "email": contact.email,
        "phone": "call the front desk",
        "first_name": "",
        "last_name": "",
        "custom_fields": "{}",
        "tags": "[]",
        "consent_changes-TOTAL_FORMS": "0",  # the consent history inline (read-only)
        "consent_changes-INITIAL_FORMS": "0",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 200  # the form again, not a server error
    assert "must be a phone number" in response.content.decode()
    data["phone"] = "+1 (555) 010-0099"
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    contact.refresh_from_db()
    assert contact.phone == "+15550100099"


def test_a_contacts_time_zone_is_chosen_in_the_admin_and_the_one_in_use_is_shown(admin_client, account, contact):
    account.time_zone = "Europe/Berlin"
    account.save()
    url = reverse("admin:contacts_contact_change", args=[contact.pk])
    page = admin_client.get(url).content.decode()
    assert "Time zone in use" in page or "time zone in use" in page
    assert "Europe/Berlin (the account&#x27;s)" in page  # +1555...: a fictional number says nothing
    data = {
        "account": account.pk,
        "email": contact.email,
        "phone": "+33612345678",
        "first_name": "",
        "last_name": "",
        "time_zone": "",
        "custom_fields": "{}",
        "tags": "[]",
        "consent_changes-TOTAL_FORMS": "0",
        "consent_changes-INITIAL_FORMS": "0",
    }
    assert admin_client.post(url, data).status_code == 302
    assert "Europe/Paris (from the phone number)" in admin_client.get(url).content.decode()
    data["time_zone"] = "Asia/Tokyo"
    assert admin_client.post(url, data).status_code == 302
    contact.refresh_from_db()
    assert contact.time_zone == "Asia/Tokyo"
    assert "Asia/Tokyo (the contact&#x27;s own)" in admin_client.get(url).content.decode()
    data["time_zone"] = "Mars/Olympus"
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
