"""Limits and rules that one path used to forget: each has one home, and every path goes through it.

- a contact holds at most MAX_TAGS tags (create, the tag endpoint, the admin, a workflow step);
- a contact needs an email address or a phone number (create, PUT, PATCH, the admin, a workflow step);
- a body sent without Content-Length (chunked) is measured like any other, never read as empty;
- a cursor the API did not write is a 400, not the first page;
- tags drop zero-width characters, and the tags stored before are respelled (migration 0004).
"""

from __future__ import annotations

import http.client
import importlib
import socket
import threading
from base64 import b64encode
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.wsgi import get_wsgi_application
from django.db import connections
from django.urls import reverse

from contacts.domain.model import MAX_TAGS
from contacts.models import Contact
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog

pytestmark = pytest.mark.django_db

CONTACTS = "/api/v1/contacts"
VALIDATION = "urn:relay:problem:validation-error"
FULL = [f"t{i}" for i in range(MAX_TAGS)]


def tags_url(contact) -> str:
    return f"{CONTACTS}/{contact.pk}/tags"


# --- tags per contact ------------------------------------------------------------------------------
def test_the_tag_endpoint_refuses_a_tag_past_the_limit(owner_api, account):
    contact = ContactFactory(account=account, tags=list(FULL))
    body = assert_problem(owner_api.post(tags_url(contact), {"tag": "one-more"}, format="json"), 400, type_=VALIDATION)
    assert error_fields(body) == ["tag"]
    assert f"at most {MAX_TAGS} tags" in body["detail"]
    contact.refresh_from_db()
    assert contact.tags == FULL
    assert owner_api.post(tags_url(contact), {"tag": "T5"}, format="json").status_code == 200  # it has it
    assert owner_api.delete(f"{tags_url(contact)}/t0").status_code == 200
    assert owner_api.post(tags_url(contact), {"tag": "one-more"}, format="json").status_code == 201


def test_many_adds_in_a_row_stop_at_the_limit(owner_api, account):
    contact = ContactFactory(account=account, tags=FULL[:-2])
    answers = [owner_api.post(tags_url(contact), {"tag": f"new{i}"}, format="json").status_code for i in range(5)]
    assert answers == [201, 201, 400, 400, 400]
    contact.refresh_from_db()
    assert len(contact.tags) == MAX_TAGS


def test_create_refuses_more_than_the_limit(owner_api):
    body = assert_problem(
        owner_api.post(CONTACTS, {"email": "a@example.com", "tags": [*FULL, "x"]}, format="json"), 400
    )
    assert error_fields(body) == ["tags"]
    assert not Contact.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_workflow_step_adding_a_tag_past_the_limit_fails_the_step_saying_why(account):
    contact = ContactFactory(account=account, tags=list(FULL))
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "one-more"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert f"at most {MAX_TAGS} tags" in ExecutionLog.objects.get(execution=run).error_details
    contact.refresh_from_db()
    assert contact.tags == FULL


def test_the_admin_refuses_more_than_the_limit_as_a_form_error(client, superuser, account):
    contact = ContactFactory(account=account, email="a@example.com", tags=list(FULL))
    client.force_login(superuser)
    response = client.post(
        reverse("admin:contacts_contact_change", args=[contact.pk]), _admin_form(contact, tags=[*FULL, "x"])
    )
    assert response.status_code == 200
    assert f"at most {MAX_TAGS} tags" in str(response.context["adminform"].form.errors["tags"])
    contact.refresh_from_db()
    assert contact.tags == FULL


def _admin_form(contact, **changes) -> dict:
    import json

    data = {
        "account": contact.account_id,
        "email": contact.email,
        "phone": contact.phone,
        "first_name": contact.first_name,
        "last_name": contact.last_name,
        "custom_fields": json.dumps(contact.custom_fields),
        "tags": json.dumps(changes.pop("tags", contact.tags)),
        "consent_changes-TOTAL_FORMS": "0",
        "consent_changes-INITIAL_FORMS": "0",
    }
    data.update(changes)
    return data


# --- an email or a phone ----------------------------------------------------------------------------
@pytest.mark.parametrize("payload", [{}, {"first_name": "Ada"}, {"email": "", "phone": "  "}, {"custom_fields": {}}])
def test_create_refuses_a_contact_with_neither_an_email_nor_a_phone(owner_api, payload):
    body = assert_problem(owner_api.post(CONTACTS, payload, format="json"), 400, type_=VALIDATION)
    assert error_fields(body) == ["email"]
    assert "needs an email address or a phone number" in body["detail"]
    assert not Contact.objects.exists()


def test_an_empty_body_creates_nothing(owner_api):
    response = owner_api.post(CONTACTS, b"", content_type="application/json")
    assert response.status_code == 400
    assert not Contact.objects.exists()


@pytest.mark.parametrize("payload", [{"phone": "+1 555 010 0000"}, {"email": "ada@example.com"}])
def test_an_email_or_a_phone_is_enough(owner_api, payload):
    assert owner_api.post(CONTACTS, payload, format="json").status_code == 201


def test_a_change_that_would_leave_no_address_is_refused(owner_api, account):
    contact = ContactFactory(account=account, email="ada@example.com", phone="")
    body = assert_problem(owner_api.patch(f"{CONTACTS}/{contact.pk}", {"email": ""}, format="json"), 400)
    assert error_fields(body) == ["email"]
    replace = {"email": "", "phone": "", "first_name": "A", "last_name": "B", "custom_fields": {}}
    assert_problem(owner_api.put(f"{CONTACTS}/{contact.pk}", replace, format="json"), 400)
    contact.refresh_from_db()
    assert contact.email == "ada@example.com"
    # With a phone given in the same change, the email may go.
    changed = owner_api.patch(f"{CONTACTS}/{contact.pk}", {"email": "", "phone": "+15550100000"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["email"], changed.json()["phone"]) == ("", "+15550100000")


def test_a_contact_stored_without_an_address_may_still_change_its_name(owner_api, account):
    """Stored before the rule: only a change of address is held to it, as with phones
    (docs/subsystems/accounts-and-contacts.md)."""
    legacy = ContactFactory(account=account, email="", phone="")
    assert owner_api.patch(f"{CONTACTS}/{legacy.pk}", {"first_name": "Ada"}, format="json").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_workflow_step_that_would_blank_the_addresses_fails_saying_why(account):
    contact = ContactFactory(account=account, email="ada@example.com", phone="")
    workflow = make_workflow(account, [{"action_type": "update_contact", "config": {"fields": {"email": ""}}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "failed"
    assert "needs an email address or a phone number" in ExecutionLog.objects.get(execution=run).error_details
    contact.refresh_from_db()
    assert contact.email == "ada@example.com"


def test_the_admin_refuses_a_contact_with_neither(client, superuser, account):
    client.force_login(superuser)
    blank = Contact(account=account, email="", phone="")
    response = client.post(reverse("admin:contacts_contact_add"), _admin_form(blank))
    assert response.status_code == 200
    assert "needs an email address or a phone number" in str(response.context["adminform"].form.errors["email"])
    assert not Contact.objects.exists()


# --- bodies without Content-Length --------------------------------------------------------------------
class _Server:
    """A real HTTP server in this process serving Relay's WSGI application."""

    def __init__(self, kind: str) -> None:
        relay = get_wsgi_application()

        def app(environ, start_response):
            try:
                yield from relay(environ, start_response)
            finally:
                connections.close_all()  # the request's thread ends; its connection must not outlive the test

        if kind == "werkzeug":  # reads chunked bodies and says so (wsgi.input_terminated), as gunicorn does
            from werkzeug.serving import make_server

            self.httpd: Any = make_server("127.0.0.1", 0, app, threaded=True)
        else:  # Django's runserver: cannot read a chunked body
            from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

            server = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler, allow_reuse_address=False)
            server.set_app(app)
            self.httpd = server
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def post_chunked(self, path: str, body: bytes, token: str) -> tuple[int | None, bytes]:
        """POST `body` in 8 KB chunks; (status, answer), or (None, b"") when the server cut the connection
        before its answer could be read (it may answer and close while a large body is still being sent)."""
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        try:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            try:
                sock.sendall(head.encode())
                for start in range(0, len(body), 8192):
                    chunk = body[start : start + 8192]
                    sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered before the whole body was sent: read the answer if it is there
            response = http.client.HTTPResponse(sock)
            try:
                response.begin()
                return response.status, response.read()
            except (ConnectionResetError, http.client.RemoteDisconnected):
                return None, b""
        finally:
            sock.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    started = _Server(request.param)
    yield started
    started.close()


def _big_contact() -> bytes:
    return b'{"email": "big@example.com", "custom_fields": {"notes": "' + b"x" * (2 * 1024 * 1024) + b'"}}'


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server", ["werkzeug"], indirect=True)
def test_a_chunked_body_over_the_limit_is_413(server, owner_api):
    status, answer = server.post_chunked(CONTACTS, _big_contact(), owner_api.token)
    assert status == 413, answer[:500]
    assert not Contact.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server", ["werkzeug"], indirect=True)
def test_a_chunked_body_within_the_limit_is_read_whole(server, owner_api):
    status, answer = server.post_chunked(CONTACTS, b'{"email": "small@example.com", "tags": ["vip"]}', owner_api.token)
    assert status == 201, answer[:500]
    assert list(Contact.objects.values_list("email", "tags")) == [("small@example.com", ["vip"])]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server", ["runserver"], indirect=True)
@pytest.mark.parametrize("body", [b'{"email": "small@example.com"}', None])
def test_a_server_that_cannot_read_a_chunked_body_answers_411_rather_than_reading_it_as_empty(server, owner_api, body):
    status, answer = server.post_chunked(CONTACTS, body or _big_contact(), owner_api.token)
    assert status == 411, answer[:500]
    assert b"Content-Length" in answer
    assert not Contact.objects.exists()


# --- cursors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",  # nothing base64 in it: DRF's decoder read it as no position, the first page
        "AAAA",  # base64 of NUL bytes
        b64encode(b"x=1").decode(),  # keys the API never writes
        b64encode(b"p=2020-01-01&p=2021-01-01").decode(),
        b64encode("p=é".encode()).decode(),
        "cD0yMDIw!!",  # a real cursor with junk after it
    ],
)
def test_a_cursor_the_api_did_not_write_is_a_400(owner_api, account, cursor):
    ContactFactory.create_batch(3, account=account)
    body = assert_problem(owner_api.get(CONTACTS, {"cursor": cursor, "page_size": 2}), 400, type_=VALIDATION)
    assert error_fields(body) == ["cursor"]


def test_the_cursors_the_api_writes_still_page_both_ways(owner_api, account):
    ContactFactory.create_batch(5, account=account)
    first = owner_api.get(CONTACTS, {"page_size": 2}).json()
    second = owner_api.get(first["next"]).json()
    back = owner_api.get(second["previous"]).json()
    assert [c["id"] for c in back["results"]] == [c["id"] for c in first["results"]]


# --- zero-width characters in tags --------------------------------------------------------------------------
def test_tags_drop_zero_width_characters_on_every_path(owner_api, account):
    created = owner_api.post(CONTACTS, {"email": "a@example.com", "tags": ["vip\u200b", "\u200bVIP"]}, format="json")
    assert created.json()["tags"] == ["vip"]
    contact = Contact.objects.get()
    assert owner_api.post(tags_url(contact), {"tag": "v\u200dip"}, format="json").status_code == 200  # the same tag
    body = assert_problem(owner_api.post(tags_url(contact), {"tag": "\u200b"}, format="json"), 400)
    assert error_fields(body) == ["tag"]
    assert owner_api.delete(f"{tags_url(contact)}/vip%E2%80%8B").json()["tags"] == []


def test_the_tags_stored_before_are_respelled():
    """Migration 0004: a stored 'vip\\u200b' could no longer be matched or removed once tags drop it."""
    migration = importlib.import_module("contacts.migrations.0004_respell_tags")
    one = ContactFactory(tags=["vip\u200b", "vip", "\u200btrial"])
    two = ContactFactory(tags=["plain"])
    odd = ContactFactory(tags=["\u200b", "x\x07"])  # nothing storable left / refused: kept as it was
    migration.respell_stored_tags(django_apps, None)
    assert Contact.objects.get(pk=one.pk).tags == ["vip", "trial"]
    assert Contact.objects.get(pk=two.pk).tags == ["plain"]
    assert Contact.objects.get(pk=odd.pk).tags == ["\u200b", "x\x07"]
