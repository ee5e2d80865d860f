"""A text message to the contact's phone: its body (at most ten segments), and the sending rules' overrides."""

from __future__ import annotations

from dataclasses import dataclass, field

from integrations.domain.sending.message import Channel
from integrations.domain.sending.settings import STEP_KEYS as SENDING_STEP_KEYS
from integrations.domain.sending.settings import StepSendingRules
from workflows.domain.actions import sending_overrides
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader

SMS_MAX_LENGTH = 1600  # ten concatenated segments


@dataclass(frozen=True)
class SendSmsConfig:
    body: str
    sending: StepSendingRules = field(default_factory=StepSendingRules)


def parse(r: Reader) -> SendSmsConfig:
    body = r.template("body", required=True, max_length=SMS_MAX_LENGTH) or ""
    return SendSmsConfig(body=body, sending=sending_overrides(r))


CONFIG = StepConfigType(name="send_sms", channel=Channel.SMS, keys=("body", *SENDING_STEP_KEYS), parse=parse)
