"""Place the call through the account's voice channel (integrations), skipped when the contact opted out (STOP
covers calls) or has no phone number."""

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
from workflows.steps.send_voice.config import SendVoiceConfig


class SendVoice:
    action_type = "send_voice"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        if skip := skip_unsendable(run, Channel.VOICE, "phone"):
            return skip
        config = cast(SendVoiceConfig, run.step.config)
        message = run.text(config.message, "message").strip() if config.message else None
        if config.message and not message:
            raise ValidationFailure("message: the message is empty once filled in")
        result = channels.voice_channel().place_call(
            to=run.contact["phone"], message=message, recording_url=config.recording_url, account_id=run.account_id
        )
        return ActionResult(result.as_response_data())

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

    def send_test(self, preview: StepPreview, to: str, account_id: int) -> DeliveryResult:
        return channels.voice_channel().place_call(
            to=phone_for_test(to),
            message=preview.voice_message or None,
            recording_url=preview.recording_url or None,
            account_id=account_id,
        )


EXECUTOR = SendVoice()
PREVIEW = EXECUTOR
