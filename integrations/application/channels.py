"""Hands out the configured channel implementations. Workflows call only these four functions.

An SMS sent for a contact (`send_sms(..., contact_id=)`) is remembered as that contact's conversation with
the sending number (`conversations.record_sms_sent`), so an inbound reply is told whose it is.

Each call reads the settings anew, so a test's `settings` override or a worker's
environment decides: EMAIL_URL (through MAILERS) for email, SMS_PROVIDER and
VOICE_PROVIDER (console | twilio) for SMS and calls. The webhook client is
always the signed, SSRF-guarded one.
"""

import concurrent.futures
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accounts.application.selectors import account_from_email
from integrations.application.conversations import record_sms_sent
from integrations.application.secrets import webhook_signing_secrets_cached
from integrations.application.tracking import SignedTrackingLinks
from integrations.application.unsubscribe import unsubscribe_url
from integrations.domain.channels import EmailChannel, SmsChannel, VoiceChannel, WebhookClient
from integrations.domain.ssrf import AllowList, TargetRefused, vet_target
from integrations.infrastructure.console import ConsoleSmsChannel, ConsoleVoiceChannel
from integrations.infrastructure.email import DjangoMailEmailChannel
from integrations.infrastructure.twilio import TwilioSmsChannel, TwilioVoiceChannel
from integrations.infrastructure.webhooks import RequestsWebhookClient, system_resolve

PROVIDERS = ("console", "twilio")


def email_channel() -> EmailChannel:
    return DjangoMailEmailChannel(
        unsubscribe_url=unsubscribe_url, account_sender=_account_sender, tracking_links=SignedTrackingLinks()
    )


def sms_channel() -> SmsChannel:
    provider = _provider("SMS_PROVIDER", "console")
    if provider == "twilio":
        return TwilioSmsChannel(on_sent=record_sms_sent)
    return ConsoleSmsChannel()  # it sends nothing, so no reply can answer it


def voice_channel() -> VoiceChannel:
    provider = _provider("VOICE_PROVIDER", _provider("SMS_PROVIDER", "console"))
    if provider == "twilio":
        return TwilioVoiceChannel()
    return ConsoleVoiceChannel()


def webhook_client() -> WebhookClient:
    return RequestsWebhookClient(signing_secrets=_signing_secrets)


SAVE_TIME_RESOLVE_SECONDS = 2.0
_resolver_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="relay-vet")


def webhook_target_problem(url: str) -> str | None:
    """Why the webhook client's SSRF guard would refuse `url`'s host, or None: asked when a workflow is saved.

    The same rule and allow-list (WEBHOOK_ALLOWED_HOSTS) as at send time. A name that does not resolve now
    (or not within two seconds) is not refused: it may resolve where the workers run, and the guard checks
    again before every request.
    """
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return None  # the URL's own rules name it
    host = parts.hostname or ""
    if not host:
        return None
    allow_list = AllowList.parse(getattr(settings, "WEBHOOK_ALLOWED_HOSTS", None))

    def resolve(name: str, on_port: int) -> list[str]:
        future = _resolver_pool.submit(system_resolve, name, on_port)
        return future.result(timeout=SAVE_TIME_RESOLVE_SECONDS)

    try:
        vet_target(host, port, allow_list=allow_list, resolve=resolve)
    except TargetRefused as exc:
        return str(exc)
    except Exception:  # no answer from DNS now: decided at send time
        return None
    return None


def _provider(name: str, default: str) -> str:
    value = (getattr(settings, name, "") or default).strip().lower()
    if value not in PROVIDERS:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(PROVIDERS)}, not {value!r}")
    return value


def _account_sender(account_id: int) -> str:
    return account_from_email(account_id)


def _signing_secrets(account_id: int) -> list[str]:
    return webhook_signing_secrets_cached(account_id=account_id)
