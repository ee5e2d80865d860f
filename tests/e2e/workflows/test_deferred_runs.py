"""A real `runworker` process carries a deferred run: the SMS step is held back until its send window opens (the
next whole minute on the contact's clock), then the same worker sends it at the opening and the run completes;
the deferral was no attempt. Up to a minute of waiting: the window's clock has minutes, not seconds."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from integrations.application.sending_rules import sending_settings_set
from integrations.infrastructure.models import OutboundMessage
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import log_rows, make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PARIS = ZoneInfo("Europe/Paris")


def window_opening_next_minute() -> tuple[dict, object]:
    opens = (timezone.now().astimezone(PARIS) + timedelta(minutes=1)).replace(second=0, microsecond=0)
    if opens.hour == 23 and opens.minute >= 50:
        pytest.skip("the window would cross midnight on Paris's clock; run again in ten minutes")
    ends = opens + timedelta(minutes=10)
    return {"days": ["mon-sun"], "hours": [f"{opens:%H:%M}-{ends:%H:%M}"], "spread": 0}, opens


def test_a_worker_sends_a_deferred_sms_at_its_windows_opening(start_worker):
    account = AccountFactory()
    contact = ContactFactory(account=account, time_zone="Europe/Paris")
    window, opens = window_opening_next_minute()
    sending_settings_set(account_id=account.pk, send_windows={"sms": window})
    workflow = make_workflow(account, [{"name": "Hello", "action_type": "send_sms", "config": {"body": "Bonjour"}}])
    start_worker(JOB_POLL_INTERVAL="0.2", LOG_LEVEL="INFO")
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution

    wait_until(lambda: log_rows(run), 30, "the step to be deferred")
    assert [row[3] for row in log_rows(run)] == ["deferred"]
    assert WorkflowExecution.objects.get(pk=run.pk).resume_at == opens

    status = lambda: WorkflowExecution.objects.values_list("status", flat=True).get(pk=run.pk)  # noqa: E731
    wait_until(lambda: status() == "completed", 100, "the run to complete at the opening")
    assert [row[2:] for row in log_rows(run)] == [(1, "deferred"), (1, "succeeded")]
    sent = OutboundMessage.objects.get(run_id=run.pk)
    assert sent.status == "sent"
    assert sent.sending_at >= opens  # not one second before the window opened
    assert [entry["status"] for entry in sent.history][:2] == ["deferred", "sending"]
