"""Making what a receiver answered safe to show. Plain Python.

A webhook's response body is shown to members and operators (the step's log, the API, the admin). A receiver
may echo what it was sent (a token in the query, an Authorization header) or carry secrets of its own, so
the copy that is shown has every credential the request carried cut out, values under secret-looking keys
masked, URLs cut to scheme and host, and is bounded. That copy is for reading only: what later steps'
conditions and templates read is the answer as it came (docs/decisions/secrets-and-step-output.md).

What counts as a credential of the request (`request_secrets`) is decided by where a value sits, never by
its length alone: so `?tier=gold` stays `gold` wherever the receiver repeats it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
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
# Headers that carry credentials whatever their value looks like (besides any name `is_secret_key` matches).
AUTH_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "x-api-key",
        "api-key",
        "apikey",
        "x-auth-token",
        "x-access-token",
        "x-csrf-token",
        "x-xsrf-token",
        "x-amz-security-token",
    }
)
# Query parameter and body key names that are credentials though `is_secret_key` does not read them so.
CREDENTIAL_NAMES = frozenset({"key", "apikey", "sig", "pwd", "jwt", "hmac", "code_verifier"})
# A path segment this long, of token characters, with both letters and digits, is taken for a generated token:
# capability URLs carry their credential there (Slack's, Discord's, webhook.site's UUIDs).
MIN_TOKEN_SEGMENT_LENGTH = 16
_TOKEN_SEGMENT = re.compile(r"[A-Za-z0-9_\-]+")


def is_credential_name(name: str, marked: Iterable[str] = ()) -> bool:
    """Whether a query parameter, body key or header named so holds a credential (`marked`: names the step
    says are secret, matched without regard to case)."""
    lowered = name.lower()
    return (
        is_secret_key(name)
        or lowered in CREDENTIAL_NAMES
        or lowered in AUTH_HEADERS
        or lowered in {m.lower() for m in marked}
    )


def request_secrets(url: str, headers: Mapping[str, str], *, body: Any = None, marked: Iterable[str] = ()) -> list[str]:
    """The credentials a request carried, to be cut from what is shown of its answer.

    They are: the URL's user and password; the values of query parameters, headers and body keys named as
    credentials (`is_credential_name`: token, api_key, signature, password, Authorization, X-Api-Key, Cookie
    ..., and the names in `marked`), an Authorization value's credential without its scheme too; and path
    segments that look like generated tokens (capability URLs). Anything else the request carried (`?tier=
    gold`, `X-Shop: 7`) is data, and the receiver may repeat it.
    """
    marked = tuple(marked)
    found: list[str] = []
    parts = urlsplit(url)
    for segment in parts.path.split("/"):
        segment = unquote(segment)
        if _looks_like_token(segment):
            found.append(segment)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_credential_name(name, marked):
            found.append(value)
    if parts.password:
        found.extend((parts.password, unquote(parts.password)))
    if parts.username:
        found.extend((parts.username, unquote(parts.username)))
    for name, value in headers.items():
        if isinstance(value, str) and value and is_credential_name(str(name), marked):
            found.append(value)
            found.extend(value.split()[1:])  # "Bearer abc": the credential alone, as a receiver may echo it
    found.extend(_body_secrets(body, marked))
    return [s for s in found if len(s) >= MIN_SECRET_LENGTH]


def _looks_like_token(segment: str) -> bool:
    return (
        len(segment) >= MIN_TOKEN_SEGMENT_LENGTH
        and bool(_TOKEN_SEGMENT.fullmatch(segment))
        and any(c.isalpha() for c in segment)
        and any(c.isdigit() for c in segment)
    )


def _body_secrets(value: Any, marked: tuple[str, ...], depth: int = 0) -> list[str]:
    """Values under credential-named keys anywhere in a JSON body (as text: a receiver echoes them so)."""
    if depth > 20:
        return []
    found: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if (
                is_credential_name(str(key), marked)
                and isinstance(item, str | int | float)
                and not isinstance(item, bool)
            ):
                found.append(str(item))
            else:
                found.extend(_body_secrets(item, marked, depth + 1))
    elif isinstance(value, list):
        for item in value:
            found.extend(_body_secrets(item, marked, depth + 1))
    return found


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
