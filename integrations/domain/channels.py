"""The interfaces through which Relay reaches the outside world.

Workflows talk to these protocols only; `integrations.application.channels`
hands out the configured implementation. A channel either returns a
DeliveryResult / WebhookResponse or raises one of the queue's classified
errors (jobs.domain.errors: RetryableError and its kinds for what may pass,
PermanentError and its kinds for what will not), so a failure is classified
once, where the protocol's answer is understood.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class EmailMessage:
    to: str
    subject: str
    text: str
    html: str | None = None
    from_email: str | None = None  # None: the account's or DEFAULT_FROM_EMAIL
    account_id: int | None = None
    contact_id: int | None = None  # for the per-contact unsubscribe link and headers
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeliveryResult:
    """What a provider said; kept in the step's response data, so never a secret."""

    channel: str  # "email", "sms", "voice"
    provider: str  # "console", "smtp", "twilio", ...
    message_id: str | None = None
    status: str = "sent"
    details: dict[str, Any] = field(default_factory=dict)  # small, redacted


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON-serializable
    message_id: str | None = None  # `webhook-id`: stable across retries of one step of one run
    account_id: int | None = None  # whose signing secret signs it


@dataclass(frozen=True)
class WebhookResponse:
    status_code: int
    duration_ms: float
    body: str = ""  # bounded and redacted
    headers: dict[str, str] = field(default_factory=dict)  # a safe subset


class EmailChannel(Protocol):
    def send_email(self, message: EmailMessage) -> DeliveryResult: ...


class SmsChannel(Protocol):
    def send_sms(self, *, to: str, body: str, account_id: int | None = None) -> DeliveryResult: ...


class VoiceChannel(Protocol):
    def place_call(
        self,
        *,
        to: str,
        message: str | None = None,
        recording_url: str | None = None,
        account_id: int | None = None,
    ) -> DeliveryResult: ...


class WebhookClient(Protocol):
    def send(self, request: WebhookRequest) -> WebhookResponse:
        """Deliver; a 2xx answer returns, anything else raises a classified error."""
        ...
