"""Answers classified: one table for HTTP, one for SMTP; Retry-After in seconds or as a date, capped."""

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from integrations.domain.failures import (
    failure_for_smtp_reply,
    failure_for_status,
    parse_retry_after,
    retry_after_from_headers,
)
from kernel.failures import (
    AuthFailure,
    RateLimited,
    ServerFailure,
    ValidationFailure,
    classify,
)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (408, ServerFailure, True),
        (429, RateLimited, True),
        (500, ServerFailure, True),
        (502, ServerFailure, True),
        (503, ServerFailure, True),
        (599, ServerFailure, True),
        (401, AuthFailure, False),
        (403, AuthFailure, False),
        (400, ValidationFailure, False),
        (404, ValidationFailure, False),
        (410, ValidationFailure, False),
        (422, ValidationFailure, False),
        (301, ValidationFailure, False),
        (302, ValidationFailure, False),
        (307, ValidationFailure, False),
    ],
)
def test_http_status_table(status, kind, retryable):
    error = failure_for_status(status, who="webhook https://hooks.example")
    assert type(error) is kind
    assert classify(error).retryable is retryable
    assert str(error).startswith(f"webhook https://hooks.example answered {status}")


def test_a_redirect_says_it_is_not_followed():
    assert "redirects are not followed" in str(failure_for_status(302, who="webhook"))


def test_rate_limit_carries_retry_after_to_the_queue():
    error = failure_for_status(429, who="twilio", retry_after=12.0, detail="error 20429")
    assert classify(error).retry_after == 12.0
    assert str(error) == "twilio answered 429 (error 20429)"


NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
        (format_datetime(NOW - timedelta(seconds=30), usegmt=True), 0.0),  # a date in the past: now
        ("Sun, 29 Nov 2026 12:01:00 GMT", 60.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
    ],
)
def test_retry_after_in_seconds_or_as_an_http_date(value, seconds):
    assert parse_retry_after(value, now=NOW) == seconds


def test_retry_after_is_capped():
    assert parse_retry_after("86400", now=NOW, cap=3600) == 3600
    assert parse_retry_after(format_datetime(NOW + timedelta(days=2), usegmt=True), now=NOW, cap=600) == 600


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (421, ServerFailure),
        (450, ServerFailure),
        (451, ServerFailure),
        (452, ServerFailure),
        (550, ValidationFailure),
        (551, ValidationFailure),
        (552, ValidationFailure),
        (553, ValidationFailure),
        (554, ValidationFailure),
        (530, AuthFailure),
        (535, AuthFailure),
    ],
)
def test_smtp_replies(code, kind):
    error = failure_for_smtp_reply(code, stage="RCPT TO")
    assert type(error) is kind
    assert str(code) in str(error)
    assert classify(error).retryable is (400 <= code < 500)


# --- rate-limit headers beside Retry-After ---------------------------------------------------------------
_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "30"}, 30.0),
        ({"Retry-After": "Tue, 01 Dec 2026 12:01:00 GMT"}, 60.0),
        ({"Retry-After": "20", "RateLimit-Reset": "99"}, 20.0),  # Retry-After wins
        ({"RateLimit-Reset": "45"}, 45.0),
        ({"RateLimit": "limit=100, remaining=0, reset=12"}, 12.0),  # the draft's older form
        ({"RateLimit": '"default";r=0;t=7'}, 7.0),  # its newer structured form
        ({"X-RateLimit-Reset": "15"}, 15.0),  # seconds
        ({"X-RateLimit-Reset": str(int(_NOW.timestamp()) + 90)}, 90.0),  # a Unix time
        ({"X-RateLimit-Reset": str(int(_NOW.timestamp()) - 90)}, 0.0),  # a Unix time already past
        ({"X-RateLimit-Reset": "100000"}, 3600.0),  # capped
        ({"RateLimit": "remaining=0"}, None),
        ({"RateLimit-Reset": "soon"}, None),
        ({}, None),
    ],
)
def test_the_wait_is_read_from_retry_after_then_the_rate_limit_headers(headers, expected):
    assert retry_after_from_headers(headers, now=_NOW, cap=3600) == expected
