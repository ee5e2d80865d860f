"""Hands out the configured channel implementations. Workflows call only these four functions.

Each call reads the settings anew, so a test's `settings` override or a worker's
environment decides: EMAIL_URL (through MAILERS) for email, SMS_PROVIDER and
VOICE_PROVIDER (console | twilio) for SMS and calls. The webhook client is
always the signed, SSRF-guarded one.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accounts.models import Account
from integrations.application.secrets import webhook_signing_secrets_cached
from integrations.application.unsubscribe import unsubscribe_url
from integrations.domain.channels import EmailChannel, SmsChannel, VoiceChannel, WebhookClient
from integrations.infrastructure.console import ConsoleSmsChannel, ConsoleVoiceChannel
from integrations.infrastructure.email import DjangoMailEmailChannel
from integrations.infrastructure.twilio import TwilioSmsChannel, TwilioVoiceChannel
from integrations.infrastructure.webhooks import RequestsWebhookClient

PROVIDERS = ("console", "twilio")


def email_channel() -> EmailChannel:
    return DjangoMailEmailChannel(unsubscribe_url=unsubscribe_url, account_sender=_account_sender)


def sms_channel() -> SmsChannel:
    provider = _provider("SMS_PROVIDER", "console")
    if provider == "twilio":
        return TwilioSmsChannel()
    return ConsoleSmsChannel()


def voice_channel() -> VoiceChannel:
    provider = _provider("VOICE_PROVIDER", _provider("SMS_PROVIDER", "console"))
    if provider == "twilio":
        return TwilioVoiceChannel()
    return ConsoleVoiceChannel()


def webhook_client() -> WebhookClient:
    return RequestsWebhookClient(signing_secrets=_signing_secrets)


def _provider(name: str, default: str) -> str:
    value = (getattr(settings, name, "") or default).strip().lower()
    if value not in PROVIDERS:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(PROVIDERS)}, not {value!r}")
    return value


def _account_sender(account_id: int) -> str:
    return Account.objects.filter(pk=account_id).values_list("from_email", flat=True).first() or ""


def _signing_secrets(account_id: int) -> list[str]:
    return webhook_signing_secrets_cached(account_id=account_id)
