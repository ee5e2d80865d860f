"""System checks: a misconfigured channel fails `manage.py check` (and the worker's start), not a step at 3 a.m."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Warning, register

from integrations.domain.ssrf import AllowList
from integrations.infrastructure.twilio import TwilioSettings

PROVIDERS = ("console", "twilio")


@register("integrations")
def check_integrations(app_configs: Any = None, **kwargs: Any) -> list[Error | Warning]:
    problems: list[Error | Warning] = []
    sms = (getattr(settings, "SMS_PROVIDER", "") or "console").strip().lower()
    voice = (getattr(settings, "VOICE_PROVIDER", "") or sms).strip().lower()
    for name, value in (("SMS_PROVIDER", sms), ("VOICE_PROVIDER", voice)):
        if value not in PROVIDERS:
            problems.append(
                Error(f"{name} must be one of {', '.join(PROVIDERS)}, not {value!r}.", id="integrations.E001")
            )
    if "twilio" in (sms, voice):
        missing = TwilioSettings.from_settings().missing()
        if missing:
            problems.append(
                Error(f"SMS or voice uses twilio but {', '.join(missing)} is not set.", id="integrations.E002")
            )
    try:
        AllowList.parse(getattr(settings, "WEBHOOK_ALLOWED_HOSTS", None))
    except ValueError as exc:
        problems.append(Error(str(exc), id="integrations.E003"))
    public = urlsplit(str(getattr(settings, "RELAY_PUBLIC_URL", "")))
    if public.scheme not in ("http", "https") or not public.netloc:
        problems.append(Error("RELAY_PUBLIC_URL must be an absolute http(s) URL.", id="integrations.E004"))
    elif public.scheme != "https" and not settings.DEBUG:
        problems.append(
            Warning(
                "RELAY_PUBLIC_URL is not https: unsubscribe links and inbound webhooks travel in the clear.",
                id="integrations.W001",
            )
        )
    return problems
