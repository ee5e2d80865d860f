"""A send step that asks the real sending rules before it sends, for the engine's tests of the deferred outcome.

The door (`integrations.application.outbound`) is what the send steps call in production; these tests are about
what the engine does with a deferral, so this stand-in asks the same rules the same way (the account's settings,
`effective_rules`, `decide` on the contact's clock) and then sends through the real SMS step. Installed by
`install_windowed_sms`, it replaces the SMS step's executor for one test.
"""

from __future__ import annotations

from typing import cast

from contacts.domain.model import ConsentState
from integrations.application.sending_rules import effective_rules
from integrations.domain.sending import Channel, Defer, Outbound, decide
from workflows.application.actions import ActionResult, StepRun
from workflows.domain.deferral import Deferral
from workflows.steps import registry
from workflows.steps.send_sms.config import SendSmsConfig
from workflows.steps.send_sms.executor import SendSms


class WindowedSms:
    action_type = "send_sms"
    external = True
    asked = 0

    def execute(self, run: StepRun) -> ActionResult:
        type(self).asked += 1
        config = cast(SendSmsConfig, run.step.config)
        purpose, rules = effective_rules(account_id=run.account_id, channel=Channel.SMS, step=config.sending)
        contact = run.contact
        message = Outbound(
            Channel.SMS,
            purpose,
            run.webhook_message_id,
            contact["phone"] or "",
            consent=ConsentState(unsubscribed=contact["unsubscribed"], sms_opted_out=contact["sms_opted_out"]),
            time_zone=run.contact_time_zone,
        )
        verdict = decide(message, rules, now=run.now)
        if isinstance(verdict, Defer):
            return ActionResult({"channel": "sms"}, deferred=Deferral.from_verdict(verdict))
        return SendSms().execute(run)


def install_windowed_sms(monkeypatch) -> type[WindowedSms]:
    """The SMS step asks the rules first, for this test (monkeypatch undoes it)."""
    WindowedSms.asked = 0
    monkeypatch.setattr(registry.load("send_sms", "executor"), "EXECUTOR", WindowedSms())
    return WindowedSms
