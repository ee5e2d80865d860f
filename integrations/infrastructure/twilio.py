"""SMS and voice through Twilio's REST API (or anything that speaks it, such as the tests' fake provider).

POST form-encoded `Messages.json` / `Calls.json` under `/2010-04-01/Accounts/{sid}/`,
basic auth with the account SID and auth token. The credentials come from
settings (the environment), never from the database, and never reach a log
line or an error: errors name the provider and the status, plus Twilio's
numeric error code when it sends one.

Inbound requests from Twilio carry X-Twilio-Signature: base64 HMAC-SHA1, keyed
with the auth token, of the full URL followed by every POST parameter's name
and value, sorted by name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.sax.saxutils import escape

import requests
from django.conf import settings

from integrations.domain.channels import DeliveryResult, OnAccepted, SentSms, attach_failure_details
from integrations.domain.failures import failure_for_status, is_success, retry_after_from_headers
from integrations.domain.sms import MAX_SMS_LENGTH, is_e164, mask_phone, normalize_phone
from kernel.failures import AuthFailure, NetworkFailure, TimeoutFailure, ValidationFailure

log = logging.getLogger("relay.integrations.twilio")

API_VERSION = "2010-04-01"
MAX_SPOKEN_LENGTH = 3000  # TwiML is capped at 4,000 characters; leave room for the markup


@dataclass(frozen=True)
class TwilioSettings:
    account_sid: str = ""
    auth_token: str = field(default="", repr=False)
    from_number: str = ""
    base_url: str = "https://api.twilio.com"
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    retry_after_max: float = 3600.0

    @classmethod
    def from_settings(cls) -> TwilioSettings:
        return cls(
            account_sid=str(getattr(settings, "TWILIO_ACCOUNT_SID", "") or ""),
            auth_token=str(getattr(settings, "TWILIO_AUTH_TOKEN", "") or ""),
            from_number=str(getattr(settings, "TWILIO_FROM_NUMBER", "") or ""),
            base_url=str(getattr(settings, "TWILIO_BASE_URL", "https://api.twilio.com") or "https://api.twilio.com"),
            connect_timeout=float(getattr(settings, "TWILIO_CONNECT_TIMEOUT", 5.0)),
            read_timeout=float(getattr(settings, "TWILIO_READ_TIMEOUT", 15.0)),
            retry_after_max=float(getattr(settings, "WEBHOOK_RETRY_AFTER_MAX_SECONDS", 3600.0)),
        )

    def missing(self) -> list[str]:
        """The settings a Twilio call cannot do without, by name."""
        names = []
        if not self.account_sid:
            names.append("TWILIO_ACCOUNT_SID")
        if not self.auth_token:
            names.append("TWILIO_AUTH_TOKEN")
        if not self.from_number:
            names.append("TWILIO_FROM_NUMBER")
        return names


class TwilioClient:
    """One resource creation per call; the answer classified the queue's way."""

    def __init__(self, config: TwilioSettings | None = None) -> None:
        self._config = config

    @property
    def config(self) -> TwilioSettings:
        return self._config or TwilioSettings.from_settings()

    def create(
        self, resource: str, form: Mapping[str, str], *, idempotency_key: str | None = None
    ) -> tuple[dict[str, Any], float]:
        """POST `form` to `{resource}.json`; the parsed answer and the time it took (ms).

        `idempotency_key` goes as an `Idempotency-Key` header: a provider or gateway speaking Twilio's API that
        honours it (Telnyx-style) answers a repeated key with the first message instead of sending another.
        Twilio's own Messages and Calls resources document no idempotency: there the header changes nothing,
        and a message sent again after an unknown outcome may arrive twice
        (docs/decisions/the-door-and-the-ledger.md)."""
        config = self.config
        missing = config.missing()
        if missing:
            raise AuthFailure(f"twilio is not configured: set {', '.join(missing)}")
        url = f"{config.base_url.rstrip('/')}/{API_VERSION}/Accounts/{config.account_sid}/{resource}.json"
        started = time.monotonic()
        try:
            answer = requests.post(
                url,
                data=dict(form),
                auth=(config.account_sid, config.auth_token),
                headers={
                    "Accept": "application/json",
                    "User-Agent": "Relay",
                    **({"Idempotency-Key": idempotency_key} if idempotency_key else {}),
                },
                timeout=(config.connect_timeout, config.read_timeout),
                allow_redirects=False,
            )
        except requests.ConnectTimeout:
            raise self._fail(
                TimeoutFailure(f"twilio: no connection within {config.connect_timeout:g} s"), started
            ) from None
        except requests.ReadTimeout:
            raise self._fail(TimeoutFailure(f"twilio: no answer within {config.read_timeout:g} s"), started) from None
        except requests.RequestException as exc:
            raise self._fail(NetworkFailure(f"twilio: connection failed ({type(exc).__name__})"), started) from None
        duration_ms = (time.monotonic() - started) * 1000
        try:
            data = answer.json()
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if is_success(answer.status_code):
            return data, duration_ms
        code = data.get("code")
        error = failure_for_status(
            answer.status_code,
            who="twilio",
            retry_after=retry_after_from_headers(answer.headers, cap=config.retry_after_max),
            detail=f"error {code}" if isinstance(code, int) else "",
        )
        response_data = {
            "provider": "twilio",
            "status_code": answer.status_code,
            "error_code": code if isinstance(code, int) else None,
            "duration_ms": round(duration_ms, 1),
        }
        raise attach_failure_details(error, response_data)

    @staticmethod
    def _fail(error: Exception, started: float) -> Exception:
        data = {"provider": "twilio", "status_code": None, "duration_ms": round((time.monotonic() - started) * 1000, 1)}
        return attach_failure_details(error, data)


def _recipient(to: str) -> str:
    number = normalize_phone(to)
    if not is_e164(number):
        raise ValidationFailure("to: not a phone number in E.164 form, e.g. +15551234567")
    return number


def _delivery(channel: str, data: dict[str, Any], duration_ms: float) -> DeliveryResult:
    details: dict[str, Any] = {"duration_ms": round(duration_ms, 1)}
    for key in ("num_segments", "price", "price_unit", "direction"):
        if data.get(key) is not None:
            details[key] = data[key]
    return DeliveryResult(
        channel=channel,
        provider="twilio",
        message_id=data.get("sid") if isinstance(data.get("sid"), str) else None,
        status=str(data.get("status") or "queued"),
        details=details,
    )


class TwilioSmsChannel:
    """`on_sent` hears of every SMS accepted for a contact (account and contact given): the application
    keeps the conversation, so a reply can be told to whom it answers."""

    def __init__(self, client: TwilioClient | None = None, on_sent: Callable[[SentSms], None] | None = None) -> None:
        self.client = client or TwilioClient()
        self.on_sent = on_sent

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
        number = _recipient(to)
        if not isinstance(body, str) or not body.strip():
            raise ValidationFailure("body: must not be empty")
        if len(body) > MAX_SMS_LENGTH:
            raise ValidationFailure(f"body: longer than {MAX_SMS_LENGTH} characters")
        from_number = self.client.config.from_number
        data, duration_ms = self.client.create(
            "Messages", {"To": number, "From": from_number, "Body": body}, idempotency_key=idempotency_key
        )
        result = _delivery("sms", data, duration_ms)
        if on_accepted is not None:
            on_accepted(result)  # first: from Twilio's answer to here is the ledger's residual window
        log.info("sms to %s accepted by twilio as %s (%s)", mask_phone(number), result.message_id, result.status)
        if self.on_sent is not None and account_id is not None and contact_id is not None:
            sent = SentSms(account_id, contact_id, number, normalize_phone(from_number), result.message_id)
            self.on_sent(sent)
        return result


class TwilioVoiceChannel:
    def __init__(self, client: TwilioClient | None = None) -> None:
        self.client = client or TwilioClient()

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
        number = _recipient(to)
        data, duration_ms = self.client.create(
            "Calls",
            {"To": number, "From": self.client.config.from_number, "Twiml": call_twiml(message, recording_url)},
            idempotency_key=idempotency_key,
        )
        result = _delivery("voice", data, duration_ms)
        if on_accepted is not None:
            on_accepted(result)
        log.info("call to %s accepted by twilio as %s (%s)", mask_phone(number), result.message_id, result.status)
        return result


def call_twiml(message: str | None, recording_url: str | None) -> str:
    """What the call plays: the recording when given, else the message read aloud."""
    if recording_url:
        parts = urlsplit(recording_url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValidationFailure("recording_url: must be an http(s) URL")
        return f"<Response><Play>{escape(recording_url.strip())}</Play></Response>"
    if not message or not message.strip():
        raise ValidationFailure("message: a call needs a message or a recording_url")
    if len(message) > MAX_SPOKEN_LENGTH:
        raise ValidationFailure(f"message: longer than {MAX_SPOKEN_LENGTH} characters")
    return f"<Response><Say>{escape(message.strip())}</Say></Response>"


# --- Inbound: Twilio's request signature -------------------------------------------------


def twilio_signature(auth_token: str, url: str, params: Mapping[str, Iterable[str]]) -> str:
    """What Twilio puts in X-Twilio-Signature for a POST of `params` to `url`."""
    payload = url
    for name in sorted(params):
        for value in sorted(set(params[name])):
            payload += name + value
    digest = hmac.new(auth_token.encode(), payload.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def _url_variants(url: str) -> list[str]:
    """The URL with and without its default port: Twilio signs whichever it was configured with."""
    parts = urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    variants = [url]
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is None and default:
        variants.append(urlunsplit(parts._replace(netloc=f"{parts.netloc}:{default}")))
    elif parts.port == default:
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@{host}" if userinfo else host
        variants.append(urlunsplit(parts._replace(netloc=netloc)))
    return variants


def signature_is_valid(
    *, auth_token: str, signature: str, urls: Iterable[str], params: Mapping[str, Iterable[str]]
) -> bool:
    if not auth_token or not signature:
        return False
    for url in urls:
        for variant in _url_variants(url):
            if hmac.compare_digest(twilio_signature(auth_token, variant, params), signature):
                return True
    return False
