"""Making what a receiver answered safe to keep. Plain Python.

A webhook's response body goes into the step's response data, where operators
read it. A receiver may echo what it was sent (a token in the query, an
Authorization header) or carry secrets of its own, so before the body is kept:
every secret the request carried is cut out, values under secret-looking keys
are masked, URLs are cut to scheme and host, and the text is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from kernel.failures import redact_urls

REDACTED = "[redacted]"

# Request headers whose values are not secrets (everything else a caller adds may be one).
HARMLESS_HEADERS = frozenset({"content-type", "accept", "user-agent", "accept-encoding", "content-length"})

_SENSITIVE_KEY = (
    r"[\w.-]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|auth\w*|credential\w*"
    r"|signature|session|cookie|private[_-]?key)[\w.-]*"
)
_JSON_PAIR = re.compile(rf'("{_SENSITIVE_KEY}"\s*:\s*)("(?:[^"\\]|\\.)*"|[^\s,}}\]]+)', re.IGNORECASE)
_FORM_PAIR = re.compile(rf"(\b{_SENSITIVE_KEY}=)([^&\s\"'<>]+)", re.IGNORECASE)
_KEY_ONLY = re.compile(_SENSITIVE_KEY, re.IGNORECASE)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE)
_WHSEC = re.compile(r"whsec_[A-Za-z0-9+/=]+")

MIN_SECRET_LENGTH = 4
MIN_PATH_SEGMENT_LENGTH = 8


def request_secrets(url: str, headers: Mapping[str, str]) -> list[str]:
    """Everything in a request that may be a secret: path, query values, credentials, header values."""
    found: list[str] = []
    parts = urlsplit(url)
    if len(parts.path) >= MIN_PATH_SEGMENT_LENGTH:
        found.append(parts.path)
        found.extend(unquote(seg) for seg in parts.path.split("/") if len(seg) >= MIN_PATH_SEGMENT_LENGTH)
        found.extend(seg for seg in parts.path.split("/") if len(seg) >= MIN_PATH_SEGMENT_LENGTH)
    if parts.query:
        found.append(parts.query)
        for _, value in parse_qsl(parts.query, keep_blank_values=True):
            found.append(value)
    if parts.password:
        found.append(parts.password)
        found.append(unquote(parts.password))
    if parts.username:
        found.append(parts.username)
    for name, value in headers.items():
        if name.lower() in HARMLESS_HEADERS or not value:
            continue
        found.append(value)
        found.extend(value.split())
    return [s for s in found if len(s) >= MIN_SECRET_LENGTH]


def is_secret_key(name: str) -> bool:
    """Whether a JSON or form key names a value that may be a secret (`password`, `api_key`, `auth*` ...)."""
    return bool(_KEY_ONLY.fullmatch(name))


def redact(text: str, *, secrets: Iterable[str] = ()) -> str:
    """`text` with known secrets cut out, secret-looking values masked and URLs cut to scheme and host."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_LENGTH:
            text = text.replace(secret, REDACTED)
    text = _JSON_PAIR.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)
    text = _FORM_PAIR.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _WHSEC.sub(REDACTED, text)
    return redact_urls(text)


def excerpt(text: str, limit: int) -> tuple[str, bool]:
    """At most `limit` characters, and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[:limit], True
