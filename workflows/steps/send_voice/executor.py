"""Place the call through the door (integrations.application.outbound: the sending rules, the ledger), skipped
when the contact opted out (STOP covers calls) or has no phone number, deferred by a send window or a cap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from integrations.application.outbound import VoiceCall
from integrations.domain.channels import DeliveryResult
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun, send_through_the_door
from workflows.application.previews import StepPreview, phone_for_test, send_test_message
from workflows.domain.workflow import Step
from workflows.infrastructure.templates import renderer
from workflows.steps.send_voice.config import SendVoiceConfig


class SendVoice:
    action_type = "send_voice"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(SendVoiceConfig, run.step.config)
        message = run.text(config.message, "message").strip() if config.message else None
        if config.message and not message:
            raise ValidationFailure("message: the message is empty once filled in")
        call = VoiceCall(run.contact["phone"] or "", message, config.recording_url)
        return send_through_the_door(run, call, config.sending)

    # --- the builder's preview and test send ---------------------------------------------------
    def render(self, step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
        config = cast(SendVoiceConfig, step.config)
        return StepPreview(
            step.action_type,
            label,
            shape="call",
            voice_message=renderer.render_text(config.message, context).strip() if config.message else "",
            recording_url=config.recording_url or "",
        )

    def send_test(
        self, preview: StepPreview, to: str, account_id: int, workflow_id: int | None = None
    ) -> DeliveryResult:
        call = VoiceCall(phone_for_test(to), preview.voice_message or None, preview.recording_url or None)
        return send_test_message(call, account_id=account_id, workflow_id=workflow_id)


EXECUTOR = SendVoice()
PREVIEW = EXECUTOR
