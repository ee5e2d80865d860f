"""Hands out the configured channel implementations. Workflows call only these four functions."""

from integrations.domain.channels import EmailChannel, SmsChannel, VoiceChannel, WebhookClient
from integrations.infrastructure.console import ConsoleEmailChannel, ConsoleSmsChannel, ConsoleVoiceChannel


def email_channel() -> EmailChannel:
    return ConsoleEmailChannel()


def sms_channel() -> SmsChannel:
    return ConsoleSmsChannel()


def voice_channel() -> VoiceChannel:
    return ConsoleVoiceChannel()


def webhook_client() -> WebhookClient:
    from integrations.infrastructure.webhooks import RequestsWebhookClient

    return RequestsWebhookClient()
