"""The API's shared conventions that need no database: error paths, filters, strict JSON."""

import io
import re
import sys
from datetime import UTC, datetime

import pytest
from rest_framework.exceptions import ErrorDetail, ParseError, ValidationError
from rest_framework.renderers import JSONRenderer

from api.filters import Boolean, Choice, FilterSet, Integer, Text, Timestamp
from api.parsers import StrictJSONParser
from api.problems import (
    InvalidInput,
    error_paths,
    problem_document,
    problem_exception_handler,
    problem_http_response,
    summarize,
)
from api.serializers import NOT_BLANK, WHITE_SPACE
from jobs.domain.states import JobStatus
from kernel.storable_json import NOT_FINITE


def test_nested_errors_become_paths():
    detail = {
        "name": [ErrorDetail("This field is required.")],
        "steps": [
            {},
            {},
            {"config": {"url": [ErrorDetail("Enter a valid URL.")]}},
        ],
        "tags": {1: [ErrorDetail("Not a valid string.")]},
        "non_field_errors": [ErrorDetail("Something about the whole object.")],
        "custom_fields": {"plan": [ErrorDetail("Bad.")]},
    }
    assert list(error_paths(detail)) == [
        {"field": "name", "message": "This field is required."},
        {"field": "steps[2].config.url", "message": "Enter a valid URL."},
        {"field": "tags[1]", "message": "Not a valid string."},
        {"field": "", "message": "Something about the whole object."},
        {"field": "custom_fields.plan", "message": "Bad."},
    ]


def test_a_top_level_list_of_messages_is_about_the_whole_body():
    assert list(error_paths([ErrorDetail("Expected a dictionary.")])) == [
        {"field": "", "message": "Expected a dictionary."}
    ]


def test_summary_names_fields_and_counts_the_rest():
    errors = [{"field": f"f{i}", "message": "bad"} for i in range(7)]
    assert summarize(errors) == "f0: bad; f1: bad; f2: bad; f3: bad; f4: bad (and 2 more)"
    assert summarize([{"field": "", "message": "whole body"}]) == "whole body"


def test_problem_documents_use_the_status_phrase_for_plain_errors():
    assert problem_document(404, "Not found.") == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "Not found.",
    }
    invalid = InvalidInput.field("email", "is taken").document()
    assert invalid["type"] == "urn:relay:problem:validation-error"
    assert invalid["errors"] == [{"field": "email", "message": "is taken"}]


FILTERS = FilterSet(
    Choice("status", JobStatus),
    Text("queue"),
    Boolean("unsubscribed"),
    Timestamp("created_after"),
    Integer("limit", maximum=10),
)


def parse(**query: str | list[str]):
    return FILTERS.parse({k: v if isinstance(v, list) else [v] for k, v in query.items()}, also_allowed=["cursor"])


def test_filters_parse_what_is_given():
    assert parse(status="dead", unsubscribed="TRUE", created_after="2026-01-31T12:00:00", cursor="x", limit="3") == {
        "status": "dead",
        "unsubscribed": True,
        "created_after": datetime(2026, 1, 31, 12, tzinfo=UTC),  # no offset: UTC
        "limit": 3,
    }
    assert parse() == {}


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ({"status": "exploded"}, "status", "pending, running, completed, retrying, failed, dead, cancelled"),
        ({"unsubscribed": "yes"}, "unsubscribed", "true, false"),
        ({"created_after": "2026-13-45"}, "created_after", "ISO 8601"),
        ({"created_after": "0001-01-01T00:00:00+05:00"}, "created_after", "out of range"),
        ({"queue": "a\x00b"}, "queue", "NUL"),
        ({"queue": "   "}, "queue", "blank"),
        ({"limit": "11"}, "limit", "between"),
        ({"limit": "x"}, "limit", "integer"),
        ({"queue": ["a", "b"]}, "queue", "at most once"),
        ({"statsu": "dead"}, "statsu", "allowed: created_after, cursor, limit, queue, status, unsubscribed"),
    ],
)
def test_filters_refuse_bad_values_naming_them(query, field, says):
    with pytest.raises(InvalidInput) as refused:
        parse(**query)
    assert [e["field"] for e in refused.value.errors] == [field]
    assert says in refused.value.errors[0]["message"]


def test_timestamps_are_converted_to_utc():
    assert parse(created_after="0822-02-20T09:10:30+16:50")["created_after"] == datetime(
        822, 2, 19, 16, 20, 30, tzinfo=UTC
    )
    with pytest.raises(InvalidInput):
        parse(created_after="0001-01-01T00:00:00+05:00")


def test_filter_errors_are_reported_together():
    with pytest.raises(InvalidInput) as refused:
        parse(status="x", unsubscribed="y")
    assert [e["field"] for e in refused.value.errors] == ["status", "unsubscribed"]


def strict(raw: bytes):
    return StrictJSONParser().parse(io.BytesIO(raw), "application/json", {})


def test_white_space_in_patterns_is_what_python_strips():
    """The schema's patterns spell white space out (ECMA's \\s differs from Python's): it is exactly isspace()."""
    listed = re.compile(f"[{WHITE_SPACE}]")
    every = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    assert [c for c in every if bool(listed.fullmatch(c)) != c.isspace()] == []
    assert re.fullmatch(NOT_BLANK, "\x1f") is None
    assert re.fullmatch(NOT_BLANK, "a")


def test_strict_json_accepts_ordinary_documents():
    assert strict(b'{"a": ["\\u00e9", 1, {"b": null}]}') == {"a": ["é", 1, {"b": None}]}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": "x\\u0000y"}',
        b'{"a\\u0000": 1}',
        b'{"a": "\\ud800"}',
        b"[" * 40 + b"]" * 40,
        b"[" * 100000 + b"]" * 100000,
        b'{"a": ',
    ],
)
def test_strict_json_refuses_what_cannot_be_stored(raw):
    with pytest.raises(ParseError):
        strict(raw)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"custom_fields": {"n": 1e400}}', "custom_fields.n"),  # beyond the float range: read as infinity
        (b'{"a": NaN}', "a"),
        (b'{"a": [1, -Infinity]}', "a[1]"),
        (b'{"a": {"b": [{"c": Infinity}]}}', "a.b[0].c"),
        (b"-1e400", ""),
    ],
)
def test_strict_json_refuses_numbers_that_are_not_finite_naming_the_field(raw, field):
    with pytest.raises(InvalidInput) as refused:
        strict(raw)
    assert refused.value.status_code == 400
    assert refused.value.errors == [{"field": field, "message": NOT_FINITE}]


def test_strict_json_keeps_large_finite_numbers():
    assert strict(b'{"n": 1.7e308, "m": -1e-400}') == {"n": 1.7e308, "m": -0.0}


def test_strict_json_names_where_an_unstorable_text_is():
    with pytest.raises(ParseError, match=r"custom_fields\.note contains a NUL character"):
        strict(b'{"custom_fields": {"note": "a\\u0000b"}}')


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        (b'{"\\ud800": 1}', "\\ud800 contains an unpaired surrogate"),
        (b'{"custom_fields": {"\\udfff": 1}}', "custom_fields.\\udfff contains an unpaired surrogate"),
        (b'{"a": [{"b\\ud800c": {"d": 1}}]}', "a[0].b\\ud800c contains an unpaired surrogate"),
        (b'{"ok": {"\\ud800": "\\ud800"}}', "ok.\\ud800 contains an unpaired surrogate"),
        (b'{"a\\u0000": 1}', "a\\u0000 contains a NUL character"),
    ],
)
def test_an_unstorable_key_is_named_with_its_path_escaped(raw, named):
    with pytest.raises(ParseError) as refused:
        strict(raw)
    detail = str(refused.value.detail)
    assert detail == f"JSON parse error - {named}"
    detail.encode("utf-8")  # the message itself can be written out
    assert "\x00" not in detail


def test_every_problem_document_is_encodable_whatever_its_message_quotes():
    for exc in (
        ParseError("bad \ud800 key"),
        ValidationError({"\udc80": ["is \ud800 wrong"]}),
        InvalidInput.field("a.\ud800", "no \udfff"),
    ):
        response = problem_exception_handler(exc, {})
        assert response is not None
        response.accepted_renderer = JSONRenderer()
        response.accepted_media_type = "application/problem+json"
        response.renderer_context = {}
        body = response.rendered_content.decode("utf-8")
        assert "\\\\ud800" in body or "\\\\udc80" in body or "\\\\udfff" in body, body
    assert b"\\\\ud800" in problem_http_response(404, "no \ud800 here").content
