"""Standard Webhooks v1 signatures (https://www.standardwebhooks.com). Plain Python.

A receiver checks that a webhook came from Relay and was not altered or
replayed: `webhook-signature` is `v1,<base64 HMAC-SHA256>` of
`{webhook-id}.{webhook-timestamp}.{body}` under the account's secret. The
secret is `whsec_` + base64 of random bytes; the HMAC key is the decoded bytes.
While a secret is being rotated, both signatures are sent, space-separated,
so receivers can switch over without dropping a message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Iterable, Mapping

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES = 32  # the spec asks for 24 to 64
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)


class InvalidSecret(ValueError):
    """Not a `whsec_` secret; the message never repeats the value."""


def generate_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key a `whsec_` secret stands for."""
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidSecret("a webhook signing secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise InvalidSecret("a webhook signing secret is whsec_ followed by base64") from None
    if not key:
        raise InvalidSecret("a webhook signing secret must not be empty")
    return key


def new_message_id() -> str:
    """A `webhook-id` for a message whose sender gave none."""
    return f"msg_{uuid.uuid4().hex}"


def sign(secret: str, *, message_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,<base64>` signature."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_headers(secrets_: Iterable[str], *, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers; one signature per secret (current first)."""
    signatures = [sign(s, message_id=message_id, timestamp=timestamp, body=body) for s in secrets_]
    headers = {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp)}
    if signatures:
        headers[SIGNATURE_HEADER] = " ".join(signatures)
    return headers


def verify(secret: str, *, headers: Mapping[str, str], body: bytes, now: int, tolerance: int = 300) -> bool:
    """What a receiver does (kept here for Relay's own tools, and as docs/decisions/webhook-signing.md's reference)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id = lowered[ID_HEADER]
        timestamp = int(lowered[TIMESTAMP_HEADER])
        offered = lowered[SIGNATURE_HEADER].split()
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, message_id=message_id, timestamp=timestamp, body=body)
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)


def mask_secret(secret: str) -> str:
    """Enough to tell two secrets apart in the admin, never enough to use one."""
    if not secret:
        return ""
    return f"{secret[: len(SECRET_PREFIX) + 4]}…"
