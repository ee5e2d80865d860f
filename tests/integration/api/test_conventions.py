"""What every endpoint shares: problem details, body limit, pagination, filters, throttling."""

import io
import json
from base64 import b64encode

import pytest
from django.core.handlers.asgi import ASGIRequest

from api.middleware import ApiBodyLimitMiddleware
from contacts.models import Contact
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, client_for, error_fields

pytestmark = pytest.mark.django_db

CONTACTS = "/api/v1/contacts"
VALIDATION = "urn:relay:problem:validation-error"


# --- Problem details for errors that happen outside our views ------------------------------


@pytest.mark.parametrize("path", ["/api/v1/nothing-here", "/api/v2/contacts", "/api/", "/api/v1/contacts/"])
def test_unknown_api_paths_are_404_problems(owner_api, path):
    body = assert_problem(owner_api.get(path), 404)
    assert body == {"type": "about:blank", "title": "Not Found", "status": 404, "detail": "Not found."}


def test_unknown_api_paths_are_problems_in_debug_too(owner_api, settings):
    settings.DEBUG = True
    assert_problem(owner_api.post("/api/v1/nothing-here", {}, format="json"), 404)


def test_pages_outside_the_api_keep_django_errors(client):
    response = client.get("/not-the-api/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.urls("tests.integration.api.urls_with_failure")
@pytest.mark.parametrize("path", ["/api/v1/test-failure", "/api/v1/test-django-failure"])
def test_a_crash_is_a_500_problem_that_reveals_nothing(owner_api, path, caplog):
    owner_api.raise_request_exception = False
    response = owner_api.get(path)
    body = assert_problem(response, 500)
    assert "hunter2" not in response.content.decode()
    assert body["type"] == "about:blank"
    assert any("hunter2" in r.getMessage() or r.exc_info for r in caplog.records)  # logged for operators


@pytest.fixture
def console_log():
    """What the configured console handler (settings.LOGGING) writes, as operators would read it."""
    import logging

    (handler,) = [h for h in logging.getLogger().handlers if getattr(h, "name", "") == "console"]
    written = io.StringIO()
    previous = handler.setStream(written)
    yield written
    handler.setStream(previous)


@pytest.mark.postgres
@pytest.mark.urls("tests.integration.api.urls_with_failure")
@pytest.mark.parametrize("path", ["/api/v1/test-database-failure", "/test-database-failure"])
def test_a_database_error_behind_a_500_is_logged_without_the_row_data_it_quotes(owner_api, path, console_log):
    owner_api.raise_request_exception = False
    response = owner_api.get(path)
    assert response.status_code == 500
    logged = console_log.getvalue()
    assert "Internal Server Error" in logged
    assert "invalid input syntax for type json" in logged  # the error's first line, for operators
    assert "Traceback" in logged
    for quoted in ("4111-1111-SECRET", "DETAIL", "CONTEXT", "Token"):
        assert quoted not in logged


def test_method_not_allowed_is_a_405_problem(owner_api):
    response = owner_api.put(CONTACTS, {}, format="json")
    assert_problem(response, 405)
    assert response["Allow"] == "GET, POST, HEAD"


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE"])
def test_options_and_trace_are_not_part_of_the_api(owner_api, contact, method):
    for path in (CONTACTS, f"{CONTACTS}/{contact.pk}", "/api/v1/jobs", "/api/v1/admin/jobs"):
        response = owner_api.generic(method, path)
        assert response.status_code in (403, 405), (method, path)  # the owner is no operator on /admin/
        assert response["Content-Type"] == "application/problem+json"


def test_a_body_that_is_not_json_is_a_415_problem(owner_api):
    response = owner_api.post(CONTACTS, "email=a@example.com", content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415)
    assert not Contact.objects.exists()


def test_an_unacceptable_accept_header_is_a_406_problem(owner_api):
    assert_problem(owner_api.get(CONTACTS, HTTP_ACCEPT="text/html"), 406)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"email": ', "parse"),
        ('{"first_name": "nul\\u0000here"}', "NUL"),
        ('{"first_name": "\\ud800"}', "surrogate"),
        ('{"custom_fields": ' + "[" * 5000 + "]" * 5000 + "}", "deep"),
    ],
)
def test_malformed_json_is_a_400_problem(owner_api, raw, why):
    response = owner_api.post(CONTACTS, raw, content_type="application/json")
    assert_problem(response, 400, type_="urn:relay:problem:malformed-body")
    assert not Contact.objects.exists()


@pytest.mark.parametrize("method", ["POST", "PATCH", "PUT"])
@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity"])
def test_a_number_that_is_not_finite_is_a_400_naming_its_field(owner_api, account, method, number):
    """1e400 is read as infinity, which jsonb cannot hold: it used to reach PostgreSQL and answer 500."""
    contact = ContactFactory(account=account, custom_fields={"n": 1})
    body = '{"email": "a@example.com", "phone": "", "first_name": "A", "last_name": "B", '
    body += f'"custom_fields": {{"ok": 2, "n": {number}}}}}'
    path = CONTACTS if method == "POST" else f"{CONTACTS}/{contact.pk}"
    response = owner_api.generic(method, path, body, content_type="application/json")
    problem = assert_problem(response, 400, type_=VALIDATION)
    assert error_fields(problem) == ["custom_fields.n"]
    assert "must be a finite number" in problem["detail"]
    assert list(Contact.objects.values_list("pk", "custom_fields")) == [(contact.pk, {"n": 1})]


def test_validation_errors_name_each_field(owner_api):
    response = owner_api.post(
        CONTACTS, {"email": "not-an-email", "tags": ["ok", 5, ""], "first_name": "x" * 151}, format="json"
    )
    body = assert_problem(response, 400, type_=VALIDATION)
    fields = error_fields(body)
    assert "email" in fields
    assert "first_name" in fields
    assert "tags[2]" in fields  # the blank one, by index
    assert all(e["message"] for e in body["errors"])
    assert "email" in body["detail"]


def test_a_body_that_is_not_an_object_is_a_400_for_the_whole_body(owner_api):
    body = assert_problem(owner_api.post(CONTACTS, [1, 2], format="json"), 400, type_=VALIDATION)
    assert error_fields(body) == [""]


# --- Body size ---------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413_before_it_is_read(owner_api, settings):
    settings.API_MAX_BODY_BYTES = 200
    payload = {"first_name": "A", "custom_fields": {"notes": "x" * 300}}
    response = owner_api.post(CONTACTS, payload, format="json")
    body = assert_problem(response, 413)
    assert "200 bytes" in body["detail"]
    assert not Contact.objects.exists()


def test_a_body_at_the_limit_is_accepted(owner_api, settings):
    raw = json.dumps({"email": "a@example.com", "custom_fields": {"notes": ""}})
    raw = raw.replace('""', '"' + "x" * (200 - len(raw)) + '"')
    assert len(raw) == 200
    settings.API_MAX_BODY_BYTES = 200
    assert owner_api.post(CONTACTS, raw, content_type="application/json").status_code == 201


def test_the_default_limit_is_one_megabyte(owner_api, settings):
    assert settings.API_MAX_BODY_BYTES == 1024 * 1024
    big = {"custom_fields": {"notes": "x" * (1024 * 1024)}}
    assert_problem(owner_api.post(CONTACTS, big, format="json"), 413)


def test_the_limit_applies_to_every_method(owner_api, contact, settings):
    settings.API_MAX_BODY_BYTES = 10
    assert_problem(owner_api.generic("GET", CONTACTS, "x" * 50, content_type="application/json"), 413)


def test_the_body_actually_received_counts_when_no_length_is_declared(settings):
    """Under ASGI a chunked body has no Content-Length; its real size is checked."""
    settings.API_MAX_BODY_BYTES = 100
    scope = {
        "type": "http",
        "method": "POST",
        "path": CONTACTS,
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],  # no content-length
    }
    oversized = ASGIRequest(scope, io.BytesIO(b'{"first_name": "' + b"x" * 500 + b'"}'))
    refused = ApiBodyLimitMiddleware.check(oversized)
    assert refused is not None
    assert refused.status_code == 413
    assert refused["Content-Type"] == "application/problem+json"
    fits = ASGIRequest(scope, io.BytesIO(b'{"first_name": "A"}'))
    assert ApiBodyLimitMiddleware.check(fits) is None
    assert fits.body == b'{"first_name": "A"}'  # still readable by the view


def test_a_malformed_content_length_is_a_400_problem(owner_api):
    response = owner_api.post(CONTACTS, {}, format="json", CONTENT_LENGTH="lots")
    assert_problem(response, 400)


# --- Pagination ----------------------------------------------------------------------------------


def _make_contacts(account, n: int) -> list[Contact]:
    return [ContactFactory.create(account=account) for _ in range(n)]


def test_lists_are_cursor_paginated_newest_first(owner_api, account):
    made = _make_contacts(account, 5)
    newest_first = [c.pk for c in sorted(made, key=lambda c: (c.created_at, c.pk), reverse=True)]
    seen: list[int] = []
    url = f"{CONTACTS}?page_size=2"
    pages = 0
    while url:
        page = owner_api.get(url).json()
        assert set(page) == {"next", "previous", "results"}
        assert len(page["results"]) <= 2
        seen += [c["id"] for c in page["results"]]
        url = page["next"]
        pages += 1
    assert seen == newest_first
    assert pages == 3


def test_a_new_row_does_not_shift_the_next_page(owner_api, account):
    made = _make_contacts(account, 4)
    first = owner_api.get(f"{CONTACTS}?page_size=2").json()
    ContactFactory(account=account)  # arrives between two page reads
    second = owner_api.get(first["next"]).json()
    ids = [c["id"] for c in first["results"] + second["results"]]
    assert sorted(ids) == sorted(c.pk for c in made)


def test_page_size_is_capped(owner_api, account, settings):
    settings.API_MAX_PAGE_SIZE = 3
    _make_contacts(account, 5)
    assert len(owner_api.get(f"{CONTACTS}?page_size=1000").json()["results"]) == 3


def test_the_default_page_size_and_cap(settings):
    assert settings.API_PAGE_SIZE == 50
    assert settings.API_MAX_PAGE_SIZE == 200


@pytest.mark.parametrize("value", ["0", "-1", "ten", ""])
def test_a_bad_page_size_is_a_400_naming_it(owner_api, value):
    body = assert_problem(owner_api.get(f"{CONTACTS}?page_size={value}"), 400, type_=VALIDATION)
    assert error_fields(body) == ["page_size"]


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!",
        b64encode(b"p=not-a-date").decode(),
        b64encode(b"r=x").decode(),
    ],
)
def test_a_bad_cursor_is_a_400_naming_it(owner_api, account, cursor):
    _make_contacts(account, 2)
    body = assert_problem(owner_api.get(CONTACTS, {"cursor": cursor}), 400, type_=VALIDATION)
    assert error_fields(body) == ["cursor"]


# --- Filters ------------------------------------------------------------------------------------


def test_an_unknown_query_parameter_is_a_400_naming_the_allowed_ones(owner_api):
    body = assert_problem(owner_api.get(f"{CONTACTS}?stauts=x"), 400, type_=VALIDATION)
    assert error_fields(body) == ["stauts"]
    message = body["errors"][0]["message"]
    for allowed in ("tag", "email", "unsubscribed", "cursor", "page_size"):
        assert allowed in message


def test_a_filter_given_twice_is_refused(owner_api):
    body = assert_problem(owner_api.get(f"{CONTACTS}?tag=a&tag=b"), 400)
    assert error_fields(body) == ["tag"]


# --- Throttling ------------------------------------------------------------------------------------


def test_each_token_is_throttled_with_retry_after(owner_api, account, settings):
    settings.API_THROTTLE_RATE = "3/min"
    for _ in range(3):
        assert owner_api.get(CONTACTS).status_code == 200
    response = owner_api.get(CONTACTS)
    body = assert_problem(response, 429, type_="urn:relay:problem:throttled")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "throttled" in body["detail"].lower()
    # Another token of the same user has its own budget.
    other = client_for(owner_api.user, account)
    assert other.get(CONTACTS).status_code == 200


def test_throttling_can_be_turned_off(owner_api, settings):
    settings.API_THROTTLE_RATE = ""
    for _ in range(5):
        assert owner_api.get(CONTACTS).status_code == 200


def test_unauthenticated_requests_are_refused_before_the_throttle(client, settings):
    settings.API_THROTTLE_RATE = "1/min"
    for _ in range(3):
        assert_problem(client.get(CONTACTS), 401)
