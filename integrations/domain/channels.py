"""The interfaces through which Relay reaches the outside world.

Workflows talk to these protocols only; `integrations.application.channels`
hands out the configured implementation. A channel either returns a
DeliveryResult / WebhookResponse or raises one of the queue's classified
errors (kernel.failures: RetryableError and its kinds for what may pass,
PermanentError and its kinds for what will not), so a failure is classified
once, where the protocol's answer is understood.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from integrations.domain.tracking import EmailTracking

# RFC 9110 field-value: visible ASCII or obs-text (latin-1), single spaces or tabs inside, none at the ends.
_FIELD_VALUE = re.compile(r"[\x21-\x7e\x80-\xff]([\x20\x21-\x7e\x80-\xff\t]*[\x21-\x7e\x80-\xff])?")


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be sent as an HTTP header value, or None; the reason never quotes the value.

    Checked before anything is sent: the HTTP library would otherwise refuse the value with an
    exception that quotes it (a header value is often a credential) and that nothing classifies.
    """
    if value == "" or _FIELD_VALUE.fullmatch(value):
        return None
    if value != value.strip(" \t"):
        return "must not start or end with a space or tab"
    if any(ord(ch) > 0xFF for ch in value):
        return "must hold only Latin-1 characters (HTTP header values are not UTF-8)"
    return "must be on one line, without control characters"


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
    # Given (with account and contact): its links go through Relay's click redirect and it carries an open pixel.
    tracking: EmailTracking | None = None
    # The ledger's key for this message (integrations.application.outbound): its Message-ID is made from it, so
    # every attempt of one message carries the same Message-ID. None: a new Message-ID.
    idempotency_key: str | None = None


@dataclass(frozen=True)
class DeliveryResult:
    """What a provider said; kept in the step's response data, so never a secret."""

    channel: str  # "email", "sms", "voice"
    provider: str  # "console", "smtp", "twilio", ...
    message_id: str | None = None
    status: str = "sent"
    details: dict[str, Any] = field(default_factory=dict)  # small, redacted

    def as_response_data(self) -> dict[str, Any]:
        """What the step's response data keeps of a delivery."""
        return {
            "channel": self.channel,
            "provider": self.provider,
            "message_id": self.message_id,
            "status": self.status,
            **self.details,
        }


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON-serializable
    message_id: str | None = None  # `webhook-id`: stable across retries of one step of one run
    account_id: int | None = None  # whose signing secret signs it
    # Names of query parameters, headers and body keys whose values are secrets too, beyond the names that
    # always are (integrations.domain.redaction.is_credential_name): cut from what is shown of the answer.
    secret_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class WebhookResponse:
    """What a receiver answered: returned on 2xx, attached to the error otherwise.

    `body` is the copy to show and log (bounded, redacted); `text` is the answer as it came (decoded, at most
    WEBHOOK_MAX_RESPONSE_BYTES), for what later steps read and nothing else: it is never logged, never shown,
    and not in `as_response_data()` or the repr.
    """

    status_code: int
    duration_ms: float
    body: str = ""  # bounded and redacted
    headers: dict[str, str] = field(default_factory=dict)  # a safe subset
    body_truncated: bool = False  # the body was longer than what is kept
    body_bytes: int = 0  # bytes read (at most WEBHOOK_MAX_RESPONSE_BYTES)
    message_id: str | None = None  # the `webhook-id` that was sent
    text: str = field(default="", repr=False)  # the answer as the receiver sent it (never shown)
    text_truncated: bool = False  # the answer was longer than WEBHOOK_MAX_RESPONSE_BYTES

    def as_response_data(self) -> dict[str, Any]:
        """What the step's response data keeps of an answer: status, bounded redacted body, timing."""
        return {
            "status_code": self.status_code,
            "duration_ms": round(self.duration_ms, 1),
            "body": self.body,
            "body_truncated": self.body_truncated,
            "body_bytes": self.body_bytes,
            "headers": dict(self.headers),
            "webhook_id": self.message_id,
        }


def failure_details(error: BaseException) -> dict[str, Any]:
    """The response data a channel attached to the error it raised ({} when it attached none).

    Channels raise the queue's classified errors; when the other side answered
    (or failed to, after some time), the error also carries what the step's log
    should keep: `error.response_data` (a dict, already redacted and bounded)
    and, for webhooks, `error.response` (the WebhookResponse, or None when no
    answer came). The error's message itself never holds a URL path, a header
    value or a body.
    """
    data = getattr(error, "response_data", None)
    return dict(data) if isinstance(data, dict) else {}


def attach_failure_details[E: BaseException](
    error: E, response_data: dict[str, Any], response: WebhookResponse | None = None
) -> E:
    """Attach what the step's log should keep to a classified error (see failure_details)."""
    error.response_data = response_data  # type: ignore[attr-defined]
    error.response = response  # type: ignore[attr-defined]
    return error


# Told the moment the provider accepted a message, before the channel tidies up (an SMTP session's QUIT): the
# ledger records it sent as early as it can be known.
OnAccepted = Callable[[DeliveryResult], None]


class EmailChannel(Protocol):
    def send_email(self, message: EmailMessage, *, on_accepted: OnAccepted | None = None) -> DeliveryResult: ...


@dataclass(frozen=True)
class SentSms:
    """An SMS a provider accepted for a contact: what an inbound reply from that phone will be answering."""

    account_id: int
    contact_id: int
    to: str  # E.164, as sent
    from_number: str  # E.164: the number the reply will be sent to
    message_id: str | None = None


class SmsChannel(Protocol):
    """`idempotency_key`: the same on every attempt of one message; sent as the provider's idempotency header.
    `on_accepted`: told the moment the provider accepted it, before anything else the channel does after."""

    def send_sms(
        self,
        *,
        to: str,
        body: str,
        account_id: int | None = None,
        contact_id: int | None = None,
        idempotency_key: str | None = None,
        on_accepted: OnAccepted | None = None,
    ) -> DeliveryResult: ...


class VoiceChannel(Protocol):
    def place_call(
        self,
        *,
        to: str,
        message: str | None = None,
        recording_url: str | None = None,
        account_id: int | None = None,
        idempotency_key: str | None = None,
        on_accepted: OnAccepted | None = None,
    ) -> DeliveryResult: ...


class WebhookClient(Protocol):
    def send(self, request: WebhookRequest) -> WebhookResponse:
        """Deliver; a 2xx answer returns, anything else raises a classified error."""
        ...
