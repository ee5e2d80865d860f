"""Errors are classified in one place and stored as `Type: message`, redacted and bounded."""

import sqlite3

import psycopg
import pytest
from django.db import DataError

from kernel.failures import (
    MAX_ERROR_LENGTH,
    AuthFailure,
    ErrorCategory,
    NetworkFailure,
    PermanentError,
    RateLimited,
    RetryableError,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
    classify,
    format_error,
    redact_urls,
    storable_text,
)


@pytest.mark.parametrize(
    ("exc", "category", "retryable"),
    [
        (TimeoutFailure("t"), ErrorCategory.TIMEOUT, True),
        (TimeoutError("t"), ErrorCategory.TIMEOUT, True),
        (TimeoutError(110, "Connection timed out"), ErrorCategory.TIMEOUT, True),
        (RateLimited("r", retry_after=3), ErrorCategory.RATE_LIMIT, True),
        (ServerFailure("503"), ErrorCategory.SERVER_ERROR, True),
        (NetworkFailure("reset"), ErrorCategory.NETWORK, True),
        (ConnectionRefusedError("refused"), ErrorCategory.NETWORK, True),
        (ConnectionResetError("reset"), ErrorCategory.NETWORK, True),
        (ValidationFailure("400"), ErrorCategory.VALIDATION, False),
        (PermanentError("bad"), ErrorCategory.VALIDATION, False),
        (AuthFailure("401"), ErrorCategory.AUTH, False),
        (RetryableError("maybe"), ErrorCategory.UNKNOWN, True),
        (ValueError("anything else"), ErrorCategory.UNKNOWN, True),
        (ZeroDivisionError(), ErrorCategory.UNKNOWN, True),
    ],
)
def test_classification(exc, category, retryable):
    classified = classify(exc)
    assert classified.category is category
    assert classified.retryable is retryable


def test_rate_limit_keeps_its_retry_after():
    assert classify(RateLimited("r", retry_after=12.5)).retry_after == 12.5
    assert classify(ServerFailure("x")).retry_after is None


def test_stored_form_is_type_and_message_on_one_line():
    try:
        raise ValueError("first line\n  second\tline")
    except ValueError as exc:
        assert format_error(exc) == "ValueError: first line second line"


def test_stored_form_has_no_stack_trace():
    def deep():
        raise RuntimeError("boom")

    try:
        deep()
    except RuntimeError as exc:
        stored = format_error(exc)
    assert stored == "RuntimeError: boom"
    assert "Traceback" not in stored
    assert "line" not in stored


def test_message_free_exceptions_store_their_type():
    assert format_error(KeyboardInterrupt()) == "KeyboardInterrupt"


def test_stored_form_is_cut_at_1000_characters():
    stored = format_error(ValueError("x" * 5000))
    assert len(stored) == MAX_ERROR_LENGTH
    assert stored.startswith("ValueError: xxx")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET https://api.example.com/v1/hook?token=SECRET failed", "GET https://api.example.com failed"),
        ("to http://user:SECRET@hooks.example.com:8443/p/a/t/h", "to http://hooks.example.com:8443"),
        ("'https://h.example.com/x#frag' refused", "'https://h.example.com' refused"),
        (
            "see ftp://files.example.com/a and https://b.example.com/c",
            "see ftp://files.example.com and https://b.example.com",
        ),
        ("no url here", "no url here"),
        ("http://[::1]:8080/secret/path", "http://[::1]:8080"),
        (
            "HTTPSConnectionPool(host='hooks.slack.com', port=443): Max retries exceeded with url: "
            "/services/T000/B000/SECRET?api_key=CANARY (Caused by ...)",
            "HTTPSConnectionPool(host='hooks.slack.com', port=443): Max retries exceeded with url: /… (Caused by ...)",
        ),
        ("GET /v1/items?token=CANARY&x=1 failed", "GET /v1/items?… failed"),
        ("is this fine? yes", "is this fine? yes"),
    ],
)
def test_urls_are_cut_to_scheme_and_host(text, expected):
    assert redact_urls(text) == expected


def test_a_token_in_a_url_never_reaches_the_stored_error():
    exc = ConnectionError(
        "HTTPSConnectionPool(host='h.example.com'): Max retries with url: https://h.example.com/hook/CANARY-123?key=CANARY-456"
    )
    stored = format_error(exc)
    assert "CANARY" not in stored
    assert stored.startswith("ConnectionError: ")


@pytest.mark.parametrize(
    "exc",
    [
        DataError(
            'duplicate key value violates unique constraint "u"\nDETAIL:  Key (email)=(ada@secret.example) exists.'
        ),
        psycopg.errors.UntranslatableCharacter(
            "unsupported Unicode escape sequence\nDETAIL:  \\u0000 cannot be converted to text.\n"
            'CONTEXT:  JSON data, line 1: {"token": "SECRET...'
        ),
        sqlite3.IntegrityError("constraint failed\nDETAIL: SECRET"),
    ],
)
def test_a_database_error_keeps_only_its_first_line(exc):
    """PostgreSQL's DETAIL and CONTEXT lines quote the refused row: a body, an address, a token."""
    stored = format_error(exc)
    assert stored.startswith(f"{type(exc).__name__}: ")
    assert "DETAIL" not in stored
    assert "CONTEXT" not in stored
    assert "secret" not in stored.lower()


def test_the_stored_form_holds_no_nul_or_lone_surrogate():
    """PostgreSQL text refuses NUL; a lone surrogate cannot even be encoded to UTF-8."""
    stored = format_error(ValueError("a\x00b \ud800c"))
    assert stored == "ValueError: a\ufffdb \ufffdc"
    stored.encode("utf-8")


def test_storable_text_replaces_only_what_postgresql_refuses():
    assert storable_text("ok é 😀 \x00 \udfff") == "ok é 😀 \ufffd \ufffd"
