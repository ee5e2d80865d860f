"""Console channels: print what would be sent. The default in development."""

import logging
import uuid

from integrations.domain.channels import DeliveryResult, EmailMessage, OnAccepted

log = logging.getLogger("relay.integrations")


class ConsoleEmailChannel:
    def send_email(self, message: EmailMessage, *, on_accepted: OnAccepted | None = None) -> DeliveryResult:
        log.info("email to %s: %s", message.to, message.subject)
        return _accepted(DeliveryResult(channel="email", provider="console", message_id=_console_id()), on_accepted)


class ConsoleSmsChannel:
    def send_sms(
        self,
        *,
        to: str,
        body: str,
        account_id: int | None = None,
        contact_id: int | None = None,
        idempotency_key: str | None = None,
        on_accepted: OnAccepted | None = None,
    ) -> DeliveryResult:
        log.info("sms to %s: %s", to, body[:160])
        return _accepted(DeliveryResult(channel="sms", provider="console", message_id=_console_id()), on_accepted)


class ConsoleVoiceChannel:
    def place_call(
        self,
        *,
        to: str,
        message: str | None = None,
        recording_url: str | None = None,
        account_id: int | None = None,
        idempotency_key: str | None = None,
        on_accepted: OnAccepted | None = None,
    ) -> DeliveryResult:
        log.info("call to %s: %s", to, "recording" if recording_url else (message or "")[:160])
        return _accepted(DeliveryResult(channel="voice", provider="console", message_id=_console_id()), on_accepted)


def _console_id() -> str:
    return f"console-{uuid.uuid4().hex[:12]}"


def _accepted(result: DeliveryResult, on_accepted: OnAccepted | None) -> DeliveryResult:
    if on_accepted is not None:
        on_accepted(result)
    return result
