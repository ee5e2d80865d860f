"""A personalised email to the contact: subject, text, an optional HTML part, and the sending rules' overrides."""

from __future__ import annotations

from dataclasses import dataclass, field

from integrations.domain.sending.message import Channel
from integrations.domain.sending.settings import STEP_KEYS as SENDING_STEP_KEYS
from integrations.domain.sending.settings import StepSendingRules
from workflows.domain.actions import sending_overrides
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader

EMAIL_SUBJECT_MAX = 998  # RFC 5322 line length
EMAIL_TEXT_MAX = 100_000
EMAIL_HTML_MAX = 500_000


@dataclass(frozen=True)
class SendEmailConfig:
    subject: str
    text: str
    html: str | None = None
    sending: StepSendingRules = field(default_factory=StepSendingRules)


def parse(r: Reader) -> SendEmailConfig:
    subject = r.template("subject", required=True, max_length=EMAIL_SUBJECT_MAX)
    text = r.template("text", required=True, max_length=EMAIL_TEXT_MAX)
    html = r.template("html", max_length=EMAIL_HTML_MAX)
    return SendEmailConfig(subject=subject or "", text=text or "", html=html, sending=sending_overrides(r))


CONFIG = StepConfigType(
    name="send_email", channel=Channel.EMAIL, keys=("subject", "text", "html", *SENDING_STEP_KEYS), parse=parse
)
