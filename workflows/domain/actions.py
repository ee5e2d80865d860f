"""The eight actions a step can take, and the rules for each one's config.

A config is checked when the workflow is saved, not when a run reaches the
step: an unknown action type, a missing subject, a URL without a scheme or a
template that does not compile are refused with the path of the problem
(`steps[2].config.url`) and the reason. Every config may also override the
step's retries (`max_attempts`, `base_delay` in seconds).

External actions (email, SMS, voice, webhook) reach the outside world: they
run before the transaction that records them, so they are at-least-once.
Internal actions (wait, update_contact, add_tag, remove_tag) change only
Relay's own tables: they run inside that transaction, so they happen exactly
once with the log row that records them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from contacts.domain.model import ConsentState, ContactError, normalize_tag
from integrations.domain.channels import header_value_problem
from workflows.domain.validation import Reader, is_template

MAX_STEPS = 100
MAX_STEP_NAME = 200
MAX_WAIT_SECONDS = 366 * 24 * 3600
MAX_ATTEMPTS_LIMIT = 20
MAX_BASE_DELAY = 3600.0  # the default WORKFLOW_STEP_MAX_DELAY: a longer base would be cut to the cap unsaid
SMS_MAX_LENGTH = 1600  # ten concatenated segments
EMAIL_SUBJECT_MAX = 998  # RFC 5322 line length
EMAIL_TEXT_MAX = 100_000
EMAIL_HTML_MAX = 500_000
WEBHOOK_BODY_MAX_BYTES = 64 * 1024
WEBHOOK_METHODS = ("POST", "PUT", "PATCH", "DELETE", "GET")
# Set by the webhook client itself (signature, framing); a step may not override them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_CUSTOM_FIELD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_DURATION = re.compile(
    r"\s*(?:(?P<w>\d+)\s*w)?\s*(?:(?P<d>\d+)\s*d)?\s*(?:(?P<h>\d+)\s*h)?\s*(?:(?P<m>\d+)\s*m)?"
    r"\s*(?:(?P<s>\d+(?:\.\d+)?)\s*s)?\s*",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}

RETRY_KEYS = ("max_attempts", "base_delay")


class ActionType(StrEnum):
    SEND_EMAIL = "send_email"
    SEND_SMS = "send_sms"
    SEND_VOICE = "send_voice"
    WEBHOOK = "webhook"
    WAIT = "wait"
    UPDATE_CONTACT = "update_contact"
    ADD_TAG = "add_tag"
    REMOVE_TAG = "remove_tag"


EXTERNAL_ACTIONS = frozenset({ActionType.SEND_EMAIL, ActionType.SEND_SMS, ActionType.SEND_VOICE, ActionType.WEBHOOK})

# Consent is law: which of the contact's consents each sending action needs (contacts owns the rule itself).
_CONSENT = {
    ActionType.SEND_EMAIL: ("email", ConsentState.allows_email),
    ActionType.SEND_SMS: ("SMS", ConsentState.allows_sms),
    ActionType.SEND_VOICE: ("calls", ConsentState.allows_voice),
}


def consent_refusal(action_type: ActionType, consent: ConsentState) -> str | None:
    """Why the contact's consent forbids this action, or None. Checked when the step runs, not when the run starts."""
    needed = _CONSENT.get(action_type)
    if needed is None:
        return None
    channel, allows = needed
    if allows(consent):
        return None
    return "the contact unsubscribed from email" if channel == "email" else f"the contact opted out of {channel}"


@dataclass(frozen=True)
class RetryOverrides:
    max_attempts: int | None = None
    base_delay: float | None = None


# --- one config type per action ------------------------------------------------------------
@dataclass(frozen=True)
class SendEmailConfig:
    subject: str
    text: str
    html: str | None = None


@dataclass(frozen=True)
class SendSmsConfig:
    body: str


@dataclass(frozen=True)
class SendVoiceConfig:
    message: str | None = None
    recording_url: str | None = None


@dataclass(frozen=True)
class WebhookConfig:
    url: str  # may hold templates; its scheme and host are fixed
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()  # values may hold templates
    body: Any = None  # JSON; every string in it is a template. None: Relay's standard envelope


@dataclass(frozen=True)
class WaitConfig:
    seconds: float | None = None
    until: str | None = None  # ISO 8601 with a UTC offset, or a template that renders to one


@dataclass(frozen=True)
class UpdateContactConfig:
    fields: tuple[tuple[str, str], ...] = ()  # contact field -> template
    custom_fields: tuple[tuple[str, Any], ...] = ()  # key -> JSON value (strings are templates)


@dataclass(frozen=True)
class TagConfig:
    tag: str  # normalized, or a template normalized when the step runs


ActionConfig = (
    SendEmailConfig | SendSmsConfig | SendVoiceConfig | WebhookConfig | WaitConfig | UpdateContactConfig | TagConfig
)


# --- parsing ----------------------------------------------------------------------------------
def parse_action_config(action_type: ActionType, reader: Reader) -> ActionConfig:
    """The typed config of one step; problems go to reader.errors (then the result is not to be used)."""
    parser = _PARSERS[action_type]
    config = parser(reader)
    reader.refuse_unknown([*_KEYS[action_type], *RETRY_KEYS])
    return config


def parse_retry_overrides(reader: Reader) -> RetryOverrides:
    attempts = reader.number("max_attempts", minimum=1, maximum=MAX_ATTEMPTS_LIMIT, integer=True)
    base_delay = reader.number("base_delay", minimum=0, maximum=MAX_BASE_DELAY)
    return RetryOverrides(
        max_attempts=int(attempts) if attempts is not None else None,
        base_delay=float(base_delay) if base_delay is not None else None,
    )


def _send_email(r: Reader) -> SendEmailConfig:
    subject = r.template("subject", required=True, max_length=EMAIL_SUBJECT_MAX)
    text = r.template("text", required=True, max_length=EMAIL_TEXT_MAX)
    html = r.template("html", max_length=EMAIL_HTML_MAX)
    return SendEmailConfig(subject=subject or "", text=text or "", html=html)


def _send_sms(r: Reader) -> SendSmsConfig:
    return SendSmsConfig(body=r.template("body", required=True, max_length=SMS_MAX_LENGTH) or "")


def _send_voice(r: Reader) -> SendVoiceConfig:
    message = r.template("message", max_length=4000)
    recording_url = r.string("recording_url", max_length=2000)
    if (message is None) == (recording_url is None) and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs exactly one of `message` (text read to the contact) or `recording_url`")
    if recording_url is not None:
        reason = http_url_problem(recording_url)
        if reason:
            r.error(r.at("recording_url"), reason)
    return SendVoiceConfig(message=message, recording_url=recording_url)


def _webhook(r: Reader) -> WebhookConfig:
    method = r.string("method", choices=WEBHOOK_METHODS, default="POST")
    url = r.string("url", required=True, max_length=2000)
    if url is not None:
        _check_webhook_url(r, url)
    headers: list[tuple[str, str]] = []
    raw_headers = r.mapping("headers", max_items=50) or {}
    for name, value in raw_headers.items():
        path = f"{r.at('headers')}.{name}"
        if not _HEADER_NAME.fullmatch(str(name)):
            r.error(path, "is not a valid HTTP header name")
        elif str(name).lower() in RESERVED_HEADERS:
            r.error(path, "is set by Relay's webhook client and cannot be overridden")
        elif not isinstance(value, str):
            r.error(path, "must be a string")
        elif len(value) > 4000:
            r.error(path, "must be at most 4000 characters")
        elif not is_template(value) and (problem := header_value_problem(value)):
            r.error(path, problem)  # a template is checked when it is rendered, by the webhook client
        elif "\r" in value or "\n" in value:
            r.error(path, "must be on one line")
        elif r.check_template_at(path, value):
            headers.append((str(name), value))
    body = r.json_value("body", max_bytes=WEBHOOK_BODY_MAX_BYTES)
    if body is not None:
        r.check_templates_in(r.at("body"), body)
    return WebhookConfig(url=url or "", method=method or "POST", headers=tuple(headers), body=body)


def _check_webhook_url(r: Reader, url: str) -> None:
    path = r.at("url")
    if is_template(url):
        # The scheme and host are fixed when the workflow is saved; only what follows may vary per run.
        fixed = url.split("{", 1)[0]
        scheme, _, rest = fixed.partition("://")
        host = rest.split("/", 1)[0] if "/" in rest else ""
        if scheme.lower() not in ("http", "https") or not host:
            r.error(path, "must start with http:// or https:// and a fixed host; templates may fill in only the path")
            return
        if r.context.check_webhook_target is not None and (refused := r.context.check_webhook_target(fixed)):
            r.error(path, guard_refusal(refused))
            return
        r.check_template_at(path, url)
        return
    reason = http_url_problem(url)
    if reason:
        r.error(path, reason)
    elif r.context.check_webhook_target is not None and (refused := r.context.check_webhook_target(url)):
        r.error(path, guard_refusal(refused))


def guard_refusal(reason: str) -> str:
    """The SSRF guard's refusal of a webhook URL, in words a marketer and their operator can act on."""
    return (
        f"Relay will not send webhooks to this address: {reason}. "
        "If it is an internal service you trust, an operator can allow its host with WEBHOOK_ALLOWED_HOSTS"
    )


def http_url_problem(url: str) -> str | None:
    """Why `url` is not an absolute http(s) URL, or None."""
    if any(ch.isspace() for ch in url):
        return "must not contain spaces"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme.lower() not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "must name a host"
    return None


def _wait(r: Reader) -> WaitConfig:
    seconds: float | None = None
    until: str | None = None
    duration = r.get("duration")
    if duration is not None:
        seconds = _duration_seconds(r, duration)
    raw_until = r.string("until", max_length=500)
    if raw_until is not None:
        if is_template(raw_until):
            if r.check_template_at(r.at("until"), raw_until):
                until = raw_until
        else:
            reason = datetime_problem(raw_until)
            if reason:
                r.error(r.at("until"), reason)
            else:
                until = raw_until
    if (duration is None) == (raw_until is None):
        r.error(r.path, 'needs exactly one of `duration` (e.g. 2, "90s", "3h", "2d 12h") or `until`')
    return WaitConfig(seconds=seconds, until=until)


def _duration_seconds(r: Reader, value: Any) -> float | None:
    path = r.at("duration")
    if isinstance(value, bool):
        r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
        return None
    seconds: float | None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
            return None
    else:
        r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
        return None
    if not 0 < seconds <= MAX_WAIT_SECONDS:
        r.error(path, f"must be more than 0 and at most {MAX_WAIT_SECONDS // 86400} days")
        return None
    return seconds


def parse_duration(text: str) -> float | None:
    """`"2d 12h"` -> 216000.0; a bare number is seconds; None when it is not a duration."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        return float(stripped)
    except ValueError:
        pass
    match = _DURATION.fullmatch(stripped)
    if not match or not any(match.groupdict().values()):
        return None
    return sum(float(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v)


def parse_datetime(text: str) -> datetime:
    """An ISO 8601 date-time with a UTC offset; raises ValueError otherwise (naive times are ambiguous)."""
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("needs a UTC offset, e.g. 2026-12-01T09:00:00+00:00 or ...Z")
    return value


def datetime_problem(text: str) -> str | None:
    try:
        parse_datetime(text)
    except ValueError as exc:
        detail = str(exc) if "UTC offset" in str(exc) else "e.g. 2026-12-01T09:00:00Z"
        return f"must be an ISO 8601 date-time with a UTC offset ({detail})"
    return None


def _update_contact(r: Reader) -> UpdateContactConfig:
    fields: list[tuple[str, str]] = []
    raw_fields = r.mapping("fields", max_items=20) or {}
    allowed = r.context.contact_fields
    for name, value in raw_fields.items():
        path = f"{r.at('fields')}.{name}"
        if name not in allowed:
            r.error(path, f"is not a contact field a step may set; expected one of: {', '.join(sorted(allowed))}")
        elif not isinstance(value, str):
            r.error(path, "must be a string")
        elif len(value) > 1000:
            r.error(path, "must be at most 1000 characters")
        elif r.check_template_at(path, value):
            fields.append((name, value))
    custom: list[tuple[str, Any]] = []
    raw_custom = r.mapping("custom_fields", max_items=100) or {}
    for key, value in raw_custom.items():
        path = f"{r.at('custom_fields')}.{key}"
        if not _CUSTOM_FIELD_KEY.fullmatch(str(key)):
            r.error(path, "a custom field name is a letter, then letters, digits or _ (at most 64)")
            continue
        before = len(r.errors)
        if r.check_json(path, value, max_bytes=16 * 1024):
            r.check_templates_in(path, value)
        if len(r.errors) == before:
            custom.append((str(key), value))
    if not raw_fields and not raw_custom and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs `fields` or `custom_fields` to set")
    return UpdateContactConfig(fields=tuple(fields), custom_fields=tuple(custom))


def _tag(r: Reader) -> TagConfig:
    tag = r.string("tag", required=True, max_length=500)
    if tag is None:
        return TagConfig(tag="")
    if is_template(tag):
        r.check_template_at(r.at("tag"), tag)
        return TagConfig(tag=tag)
    try:
        return TagConfig(tag=normalize_tag(tag))
    except ContactError as exc:
        r.error(r.at("tag"), exc.reason)
        return TagConfig(tag="")


_PARSERS: dict[ActionType, Callable[[Reader], ActionConfig]] = {
    ActionType.SEND_EMAIL: _send_email,
    ActionType.SEND_SMS: _send_sms,
    ActionType.SEND_VOICE: _send_voice,
    ActionType.WEBHOOK: _webhook,
    ActionType.WAIT: _wait,
    ActionType.UPDATE_CONTACT: _update_contact,
    ActionType.ADD_TAG: _tag,
    ActionType.REMOVE_TAG: _tag,
}
_KEYS: dict[ActionType, tuple[str, ...]] = {
    ActionType.SEND_EMAIL: ("subject", "text", "html"),
    ActionType.SEND_SMS: ("body",),
    ActionType.SEND_VOICE: ("message", "recording_url"),
    ActionType.WEBHOOK: ("method", "url", "headers", "body"),
    ActionType.WAIT: ("duration", "until"),
    ActionType.UPDATE_CONTACT: ("fields", "custom_fields"),
    ActionType.ADD_TAG: ("tag",),
    ActionType.REMOVE_TAG: ("tag",),
}
