"""How an outside system's answer maps onto the queue's classified errors. Plain Python.

One table for HTTP (webhooks, the SMS/voice provider) and one for SMTP, so a
status code means the same thing on every channel. The messages name the
system and the code only: never a URL path, a header value or a body.
"""

from __future__ import annotations

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


def failure_for_smtp_reply(code: int, *, stage: str) -> JobError:
    """An SMTP reply that refused the message: 4xx may pass, 5xx will not (530/534/535: our credentials)."""
    if code in (530, 534, 535):
        return AuthFailure(f"SMTP server refused authentication ({code}) at {stage}")
    if 400 <= code < 500:
        return ServerFailure(f"SMTP server answered {code} at {stage} (temporary)")
    return ValidationFailure(f"SMTP server answered {code} at {stage} (permanent)")
