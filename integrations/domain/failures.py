"""How an outside system's answer maps onto the queue's classified errors. Plain Python.

One table for HTTP (webhooks, the SMS/voice provider) and one for SMTP, so a
status code means the same thing on every channel. The messages name the
system and the code only: never a URL path, a header value or a body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from kernel.failures import (
    AuthFailure,
    JobError,
    RateLimited,
    ServerFailure,
    ValidationFailure,
)


def is_success(status: int) -> bool:
    return 200 <= status < 300


def failure_for_status(status: int, *, who: str, retry_after: float | None = None, detail: str = "") -> JobError:
    """The error for a non-2xx HTTP answer.

    408, 429 and 5xx may pass, after the server's Retry-After when it sent one; 401 and
    403 are auth failures; every other answer, a 3xx included (redirects are
    not followed), is permanent.
    """
    suffix = f" ({detail})" if detail else ""
    message = f"{who} answered {status}{suffix}"
    if status == 429:
        return RateLimited(message, retry_after=retry_after)
    if status == 408 or 500 <= status < 600:
        return ServerFailure(message, retry_after=retry_after)
    if status in (401, 403):
        return AuthFailure(message)
    if 300 <= status < 400:
        return ValidationFailure(f"{message}: redirects are not followed")
    return ValidationFailure(message)


def parse_retry_after(value: str | None, *, now: datetime | None = None, cap: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date; capped; None if unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    seconds: float | None
    if value.isdigit():
        seconds = float(int(value))
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    if cap is not None:
        seconds = min(seconds, cap)
    return seconds


# RateLimit (IETF draft-ietf-httpapi-ratelimit-headers): older drafts send `limit=10, remaining=0, reset=30`,
# newer ones `"default";r=0;t=30`; either way the reset is delta-seconds.
_RATELIMIT_RESET = re.compile(r"(?:^|[\s,;])(?:reset|t)\s*=\s*(\d{1,10})(?![\d.])")
# Beyond this a number cannot be delta-seconds (ten years): it is a Unix time.
_MAX_DELTA = 10 * 365 * 86400


def retry_after_from_headers(
    headers: Mapping[str, str], *, now: datetime | None = None, cap: float | None = None
) -> float | None:
    """Seconds the other side asked us to wait, from the first header that says: Retry-After (seconds or
    an HTTP date), RateLimit-Reset (seconds), RateLimit (the draft's `reset=`/`t=`), X-RateLimit-Reset
    (seconds, or a Unix time when it is larger than now, as GitHub and others send it). Capped; None if
    no header says."""
    when = now or datetime.now(UTC)
    found = parse_retry_after(headers.get("Retry-After"), now=when)
    if found is None:
        found = _delta_seconds(headers.get("RateLimit-Reset"))
    if found is None:
        match = _RATELIMIT_RESET.search(headers.get("RateLimit") or "")
        found = float(match.group(1)) if match else None
    if found is None:
        value = _delta_seconds(headers.get("X-RateLimit-Reset"), unix_allowed=True)
        if value is not None:
            epoch = when.timestamp()
            found = max(0.0, value - epoch) if value > epoch or value > _MAX_DELTA else value
    if found is not None and cap is not None:
        found = min(found, cap)
    return found


def _delta_seconds(value: str | None, *, unix_allowed: bool = False) -> float | None:
    """A whole number of seconds (a fraction is accepted for X-RateLimit-Reset, some send milliseconds' worth)."""
    value = (value or "").strip()
    if value.isdigit() and len(value) <= 12:
        return float(int(value))
    if unix_allowed and re.fullmatch(r"\d{1,12}\.\d{1,6}", value):
        return float(value)
    return None


def failure_for_smtp_reply(code: int, *, stage: str) -> JobError:
    """An SMTP reply that refused the message: 4xx may pass, 5xx will not (530/534/535: our credentials)."""
    if code in (530, 534, 535):
        return AuthFailure(f"SMTP server refused authentication ({code}) at {stage}")
    if 400 <= code < 500:
        return ServerFailure(f"SMTP server answered {code} at {stage} (temporary)")
    return ValidationFailure(f"SMTP server answered {code} at {stage} (permanent)")
