"""A workflow's own send windows and caps in the builder: a marketer overrides the account's for SMS by a legal
preset, says its messages are transactional and exempt from the window by an explicit tick, turns caps off;
stored as the rules read it, read live (no publish needed), shown back; mistakes sit on their fields."""

import pytest
from django.urls import reverse

from integrations.application.sending_rules import effective_rules
from integrations.domain.sending import Channel, Purpose
from tests.integration.workflows.test_admin import form_data
from workflows.infrastructure.models import Workflow

pytestmark = pytest.mark.django_db

STEPS = [{"name": "Hello", "action_type": "send_sms", "config": {"body": "Hi"}}]


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def test_a_workflow_overrides_the_accounts_window_purpose_and_caps(admin_client, account):
    data = form_data(
        account,
        STEPS,
        sr_purpose="transactional",
        sr_transactional_exempt="on",
        sr_sms_window="us_fl",
        sr_email_window="custom",
        sr_email_days=["sat", "sun"],
        sr_email_hours="10:00-12:00",
        sr_caps="none",
        sr_when_capped="skip",
    )
    response = admin_client.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow = Workflow.objects.get()
    assert workflow.sending_rules == {
        "purpose": "transactional",
        "transactional_window": "exempt",
        "send_windows": {"email": {"days": ["sat", "sun"], "hours": ["10:00-12:00"]}, "sms": "us_fl"},
        "frequency_caps": [],
        "when_capped": "skip",
    }
    purpose, rules = effective_rules(account_id=account.pk, channel=Channel.SMS, workflow_rules=workflow.sending_rules)
    assert (purpose, rules.window.name, rules.caps, rules.transactional_exempt_from_window) == (
        Purpose.TRANSACTIONAL,
        "us_fl",
        (),
        True,
    )
    page = admin_client.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content.decode()
    assert "When its messages may go (send windows and caps)" in page
    assert '<option value="us_fl" selected>' in page
    assert 'name="sr_email_hours" value="10:00-12:00"' in page
    assert 'id="id_sr_transactional_exempt" checked>' in page


def test_a_workflow_that_sets_nothing_keeps_the_accounts_and_its_mistakes_sit_on_their_fields(admin_client, account):
    response = admin_client.post(reverse("admin:workflows_workflow_add"), form_data(account, STEPS))
    assert response.status_code == 302
    assert Workflow.objects.get().sending_rules == {}

    bad = form_data(
        account,
        STEPS,
        name="Other",
        sr_all_window="custom",
        sr_all_days=["mon"],
        sr_all_hours="25:00-26:00",
        sr_caps="these",
        sr_cap0_max="2",
    )
    response = admin_client.post(reverse("admin:workflows_workflow_add"), bad)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["sr_all_hours"] == ['Must be hours as "HH:MM-HH:MM" on a 24-hour clock (end 24:00 for midnight)']
    assert "hours" in errors["sr_cap0_every"][0]
    assert Workflow.objects.count() == 1


def test_the_service_checks_a_workflows_sending_rules_by_path_and_stores_nothing_wrong(account):
    from workflows.application.workflows import WorkflowService
    from workflows.domain.errors import WorkflowValidationError

    service = WorkflowService()
    workflow = service.create(account_id=account.pk, name="W", steps=STEPS, sending_rules={"send_window": "fr"})
    assert Workflow.objects.get(pk=workflow.pk).sending_rules == {"send_window": "fr"}
    with pytest.raises(WorkflowValidationError) as refused:
        service.update(workflow_id=workflow.pk, sending_rules={"send_window": "texas", "frequency_caps": [{"max": 0}]})
    assert sorted(refused.value.as_dict()) == [
        "sending_rules.frequency_caps[0]",
        "sending_rules.frequency_caps[0].max",
        "sending_rules.send_window",
    ]
    assert Workflow.objects.get(pk=workflow.pk).sending_rules == {"send_window": "fr"}  # nothing stored


def sms_step_in_form_mode(**fields) -> dict:
    data = {
        "steps-TOTAL_FORMS": 1,
        "steps-0-position": 0,
        "steps-0-name": "Hello",
        "steps-0-action_type": "send_sms",
        "steps-0-config_mode": "form",
        "steps-0-send_sms-body": "Hi",
        "steps-0-send_sms-sending_caps": "",
    }
    return data | {f"steps-0-send_sms-{name}": value for name, value in fields.items()}


def test_a_send_step_keeps_its_own_window_and_caps_on_its_card(admin_client, account):
    data = form_data(account, []) | sms_step_in_form_mode(
        sending_purpose="transactional",
        sending_all_window="custom",
        sending_all_days=["mon", "tue"],
        sending_all_hours="10:00-11:00",
        sending_caps="these",
        sending_cap0_max="1",
        sending_cap0_every="7",
        sending_cap0_unit="days",
        sending_cap0_channel="sms",
        sending_when_capped="skip",
    )
    response = admin_client.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    (step,) = Workflow.objects.get().steps.all()
    assert step.config == {
        "body": "Hi",
        "purpose": "transactional",
        "send_window": {"days": ["mon", "tue"], "hours": ["10:00-11:00"]},
        "frequency_caps": [{"max": 1, "days": 7, "channel": "sms"}],
        "when_capped": "skip",
    }
    page = admin_client.get(reverse("admin:workflows_workflow_change", args=[step.workflow_id])).content.decode()
    assert 'name="steps-0-send_sms-sending_all_hours" value="10:00-11:00"' in page  # on the card, not as JSON
    assert 'data-show-if="steps-0-send_sms-sending_all_window=custom"' in page

    bad = form_data(account, [], name="Bad") | sms_step_in_form_mode(
        sending_all_window="custom", sending_all_days=["mon"], sending_all_hours="10:00"
    )
    response = admin_client.post(reverse("admin:workflows_workflow_add"), bad)
    assert response.status_code == 200
    form = response.context["inline_admin_formsets"][0].formset.forms[0].config_forms["send_sms"]
    assert form.errors["sending_all_hours"][0].startswith('Must be hours as "HH:MM-HH:MM"')
    assert Workflow.objects.count() == 1


def test_a_step_that_sets_nothing_keeps_the_workflows_rules(admin_client, account):
    response = admin_client.post(
        reverse("admin:workflows_workflow_add"), form_data(account, []) | sms_step_in_form_mode()
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Workflow.objects.get().steps.get().config == {"body": "Hi"}
