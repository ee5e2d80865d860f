"""Idempotency-Key: what a key may be, and what makes two requests "the same". Plain Python.

A client that retries a request (a timeout, a dropped connection) sends the
same `Idempotency-Key` header with it; the first answer is remembered and
given back instead of doing the work twice. The same key with another
request is a client bug, refused rather than guessed at.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

MAX_KEY_LENGTH = 200  # a UUID (the usual choice) is 36


class InvalidKey(ValueError):
    """The header is not a usable key; the message says why (never repeats the value)."""


class KeyReused(Exception):
    """The key was already used for a different request (another body, endpoint or method)."""


def check_key(raw: str) -> str:
    """The key as given, or InvalidKey. Printable ASCII (a header value), 1 to 200 characters."""
    if not raw or not raw.strip():
        raise InvalidKey("must not be empty")
    if len(raw) > MAX_KEY_LENGTH:
        raise InvalidKey(f"must be at most {MAX_KEY_LENGTH} characters")
    if not (raw.isascii() and raw.isprintable()):
        raise InvalidKey("must be printable ASCII characters (a UUID is a good key)")
    return raw


def fingerprint(*, method: str, path: str, body: Any) -> str:
    """SHA-256 of the request as canonical JSON: the same body with keys in another order is the same request."""
    canonical = json.dumps(
        {"method": method.upper(), "path": path, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Answer:
    """A response as remembered: given back byte for byte (same status, same body) to a retry."""

    status: int
    body: str  # the rendered JSON, kept as text so a replay is byte-identical
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def remembered(self) -> bool:
        """Only successes are remembered: a refusal changed nothing, so the client may fix the cause and retry."""
        return 200 <= self.status < 300


def replay(*, stored_fingerprint: str, stored: Answer, request_fingerprint: str) -> Answer:
    """The stored answer for a retry of the same request; KeyReused for a different one."""
    if stored_fingerprint != request_fingerprint:
        raise KeyReused("this Idempotency-Key was already used with a different request")
    return stored
