"""The account's sending settings (a window per channel, caps, when capped), a workflow's and a step's
overrides, and the one function that says which rules a message obeys."""

import pytest
from django.core.exceptions import ValidationError

from integrations.application.sending_rules import (
    SendingSettingsInvalid,
    account_sending_settings,
    effective_rules,
    sending_settings_set,
)
from integrations.domain.sending import PRESETS, Channel, FrequencyCap, Purpose, WhenCapped
from integrations.infrastructure.models import SendingSettings
from tests.integration.workflows.support import make_workflow
from workflows.application.definitions import load_version
from workflows.infrastructure.models import Workflow, WorkflowVersion

pytestmark = pytest.mark.django_db


def test_a_new_account_keeps_marketing_sms_and_calls_in_the_us_federal_window(account):
    assert not SendingSettings.objects.filter(account=account).exists()
    for channel in (Channel.SMS, Channel.VOICE):
        purpose, rules = effective_rules(account_id=account.pk, channel=channel)
        assert (purpose, rules.window, rules.caps) == (Purpose.MARKETING, PRESETS["us_federal"].window, ())
    assert effective_rules(account_id=account.pk, channel=Channel.EMAIL)[1].window is None


def test_the_accounts_settings_are_stored_checked_whole_and_read(account):
    sending_settings_set(
        account_id=account.pk,
        send_windows={"sms": "fr", "voice": None, "email": {"days": ["mon-fri"], "hours": ["09:00-18:00"]}},
        frequency_caps=[{"max": 3, "days": 1}, {"max": 1, "hours": 24, "channel": "sms"}],
        when_capped="skip",
    )
    settings = account_sending_settings(account_id=account.pk)
    assert settings.window(Channel.SMS) == PRESETS["fr"].window
    assert settings.window(Channel.VOICE) is None
    assert settings.caps == (FrequencyCap(3, days=1), FrequencyCap(1, hours=24, channel=Channel.SMS))
    assert settings.when_capped is WhenCapped.SKIP
    with pytest.raises(SendingSettingsInvalid) as refused:
        sending_settings_set(
            account_id=account.pk, send_windows={"sms": "us_texas"}, frequency_caps=[{"max": 0, "days": 1}]
        )
    assert [p.path for p in refused.value.problems] == ["send_windows.sms", "frequency_caps[0].max"]
    assert SendingSettings.objects.get(account=account).send_windows["sms"] == "fr"  # nothing stored
    # What is not given stays.
    sending_settings_set(account_id=account.pk, when_capped="defer")
    assert account_sending_settings(account_id=account.pk).caps[0] == FrequencyCap(3, days=1)


def test_the_model_refuses_what_the_rules_would_not_read(account):
    row = SendingSettings(account=account, send_windows={"fax": "fr"}, frequency_caps=[{"max": 2}])
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert set(refused.value.message_dict) == {"send_windows", "frequency_caps"}
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    workflow.sending_rules = {"purpose": "spam"}
    with pytest.raises(ValidationError, match=r"sending_rules.purpose: must be marketing or transactional"):
        workflow.full_clean()


def test_a_workflow_and_its_step_override_the_account(account):
    sending_settings_set(account_id=account.pk, send_windows={"sms": "us_fl"}, frequency_caps=[{"max": 2, "days": 1}])
    workflow = make_workflow(
        account,
        [
            {"action_type": "send_sms", "config": {"body": "hi"}},
            {
                "action_type": "send_sms",
                "config": {"body": "urgent", "purpose": "transactional", "send_window": None, "frequency_caps": []},
            },
        ],
    )
    Workflow.objects.filter(pk=workflow.pk).update(
        sending_rules={"send_window": "fr", "transactional_window": "exempt", "when_capped": "skip"}
    )
    workflow.refresh_from_db()
    version = load_version(WorkflowVersion.objects.get(workflow=workflow).pk)
    first, second = (step.config.sending for step in version.definition.steps)
    purpose, rules = effective_rules(
        account_id=account.pk, channel=Channel.SMS, workflow_rules=workflow.sending_rules, step=first
    )
    assert (purpose, rules.window, rules.caps, rules.when_capped) == (
        Purpose.MARKETING,
        PRESETS["fr"].window,
        (FrequencyCap(2, days=1),),
        WhenCapped.SKIP,
    )
    purpose, rules = effective_rules(
        account_id=account.pk, channel=Channel.SMS, workflow_rules=workflow.sending_rules, step=second
    )
    assert (purpose, rules.window, rules.caps, rules.transactional_exempt_from_window) == (
        Purpose.TRANSACTIONAL,
        None,
        (),
        True,
    )
    test_purpose, _ = effective_rules(account_id=account.pk, channel=Channel.SMS, step=second, purpose=Purpose.TEST)
    assert test_purpose is Purpose.TEST


def test_a_send_steps_sending_keys_are_checked_at_save_by_path(account):
    from workflows.application.workflows import WorkflowService
    from workflows.domain.errors import WorkflowValidationError

    with pytest.raises(WorkflowValidationError) as refused:
        WorkflowService().create(
            account_id=account.pk,
            name="bad",
            steps=[
                {
                    "action_type": "send_sms",
                    "config": {"body": "hi", "send_window": {"days": ["mon"], "hours": ["25:00-26:00"]}},
                },
                {"action_type": "send_email", "config": {"subject": "s", "text": "t", "when_capped": "drop"}},
                {"action_type": "add_tag", "config": {"tag": "x", "send_window": "fr"}},
            ],
        )
    paths = [error.path for error in refused.value.errors]
    assert paths == [
        "steps[0].config.send_window.hours[0]",
        "steps[1].config.when_capped",
        "steps[2].config.send_window",
    ]
