"""Send the text message through the account's SMS channel (integrations), skipped when the contact opted out
or has no phone number."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from integrations.application import channels
from integrations.domain.channels import DeliveryResult
from integrations.domain.sending import Channel
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun, skip_unsendable
from workflows.application.previews import StepPreview, phone_for_test
from workflows.domain.workflow import Step
from workflows.infrastructure.templates import renderer
from workflows.steps.send_sms.config import SMS_MAX_LENGTH, SendSmsConfig


class SendSms:
    action_type = "send_sms"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        if skip := skip_unsendable(run, Channel.SMS, "phone"):
            return skip
        config = cast(SendSmsConfig, run.step.config)
        body = run.text(config.body, "body").strip()
        if not body:
            raise ValidationFailure("body: the message is empty once filled in")
        if len(body) > SMS_MAX_LENGTH:
            raise ValidationFailure(f"body: the message is longer than {SMS_MAX_LENGTH} characters once filled in")
        result = channels.sms_channel().send_sms(
            to=run.contact["phone"], body=body, account_id=run.account_id, contact_id=run.contact_id
        )
        return ActionResult(result.as_response_data())

    # --- the builder's preview and test send ---------------------------------------------------
    def render(self, step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
        config = cast(SendSmsConfig, step.config)
        return StepPreview(step.action_type, label, shape="sms", sms=renderer.render_text(config.body, context).strip())

    def send_test(self, preview: StepPreview, to: str, account_id: int) -> DeliveryResult:
        return channels.sms_channel().send_sms(to=phone_for_test(to), body=preview.sms, account_id=account_id)


EXECUTOR = SendSms()
PREVIEW = EXECUTOR
