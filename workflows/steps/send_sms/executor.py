"""Send the text message through the door (integrations.application.outbound: the sending rules, the ledger),
skipped when the contact opted out or has no phone number, deferred by a send window or a frequency cap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from integrations.application.outbound import SmsText
from integrations.domain.channels import DeliveryResult
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun, send_through_the_door
from workflows.application.previews import StepPreview, phone_for_test, send_test_message
from workflows.domain.workflow import Step
from workflows.infrastructure.templates import renderer
from workflows.steps.send_sms.config import SMS_MAX_LENGTH, SendSmsConfig


class SendSms:
    action_type = "send_sms"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(SendSmsConfig, run.step.config)
        body = run.text(config.body, "body").strip()
        if not body:
            raise ValidationFailure("body: the message is empty once filled in")
        if len(body) > SMS_MAX_LENGTH:
            raise ValidationFailure(f"body: the message is longer than {SMS_MAX_LENGTH} characters once filled in")
        return send_through_the_door(run, SmsText(run.contact["phone"] or "", body), config.sending)

    # --- the builder's preview and test send ---------------------------------------------------
    def render(self, step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
        config = cast(SendSmsConfig, step.config)
        return StepPreview(step.action_type, label, shape="sms", sms=renderer.render_text(config.body, context).strip())

    def send_test(
        self, preview: StepPreview, to: str, account_id: int, workflow_id: int | None = None
    ) -> DeliveryResult:
        message = SmsText(phone_for_test(to), preview.sms)
        return send_test_message(message, account_id=account_id, workflow_id=workflow_id)


EXECUTOR = SendSms()
PREVIEW = EXECUTOR
