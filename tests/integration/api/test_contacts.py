"""The contacts endpoints: each success, and each way they refuse."""

import pytest

from contacts.application import events
from contacts.models import ConsentChange, Contact
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields

pytestmark = pytest.mark.django_db

CONTACTS = "/api/v1/contacts"
VALIDATION = "urn:relay:problem:validation-error"


def detail(contact_or_id) -> str:
    return f"{CONTACTS}/{getattr(contact_or_id, 'pk', contact_or_id)}"


@pytest.fixture
def published():
    """Every contact event published during the test."""
    seen: list[events.ContactEvent] = []
    events.subscribe(seen.append)
    yield seen
    events._subscribers.remove(seen.append)


# --- List -------------------------------------------------------------------------------------


def test_list_shows_only_the_callers_account(owner_api, account, other_account):
    mine = ContactFactory(account=account)
    ContactFactory(account=other_account)
    body = owner_api.get(CONTACTS).json()
    assert [c["id"] for c in body["results"]] == [mine.pk]
    row = body["results"][0]
    assert set(row) == {
        "id",
        "email",
        "phone",
        "first_name",
        "last_name",
        "time_zone",
        "resolved_time_zone",
        "custom_fields",
        "tags",
        "unsubscribed",
        "sms_opted_out",
        "created_at",
        "updated_at",
    }
    assert row["email"] == mine.email


def test_list_filters(owner_api, account):
    vip = ContactFactory(account=account, email="Ada@Example.com", tags=["vip", "trial"])
    lapsed = ContactFactory(account=account, tags=["vip-lapsed"], unsubscribed=True)
    plain = ContactFactory(account=account, phone="+15550001111", sms_opted_out=True)

    def ids(query: str) -> set[int]:
        response = owner_api.get(f"{CONTACTS}?{query}")
        assert response.status_code == 200, response.content
        return {c["id"] for c in response.json()["results"]}

    assert ids("tag=VIP") == {vip.pk}  # whole tags only, case-insensitive
    assert ids("tag=vip-lapsed") == {lapsed.pk}
    assert ids("email=ada@example.com") == {vip.pk}
    assert ids("unsubscribed=true") == {lapsed.pk}
    assert ids("unsubscribed=false") == {vip.pk, plain.pk}
    assert ids("sms_opted_out=1") == {plain.pk}
    assert ids("phone=%2B15550001111") == {plain.pk}
    assert ids("created_after=2000-01-01T00:00:00Z") == {vip.pk, lapsed.pk, plain.pk}
    assert ids("created_before=2000-01-01") == set()
    assert ids("tag=vip&unsubscribed=false") == {vip.pk}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("unsubscribed=maybe", "unsubscribed"),
        ("created_after=yesterday", "created_after"),
        ("tag=%00", "tag"),
        ("email=", "email"),
        ("tag=" + "x" * 300, "tag"),
    ],
)
def test_list_refuses_bad_filter_values_naming_them(owner_api, query, field):
    body = assert_problem(owner_api.get(f"{CONTACTS}?{query}"), 400, type_=VALIDATION)
    assert error_fields(body) == [field]


def test_viewers_read_contacts(api_as, contact):
    viewer = api_as("viewer")
    assert viewer.get(CONTACTS).status_code == 200
    assert viewer.get(detail(contact)).status_code == 200


# --- Create ------------------------------------------------------------------------------------


def test_create(owner_api, account, published):
    response = owner_api.post(
        CONTACTS,
        {
            "email": "grace@example.com",
            "first_name": "Grace",
            "custom_fields": {"plan": "pro"},
            "tags": ["Customer", "trial"],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    contact = Contact.objects.get(pk=body["id"])
    assert contact.account_id == account.pk
    assert response["Location"] == detail(contact)
    assert body["tags"] == ["customer", "trial"]
    assert body["custom_fields"] == {"plan": "pro"}
    assert [(e.name, e.data) for e in published] == [
        ("contact.created", {}),
        ("tag.added", {"tag": "customer"}),
        ("tag.added", {"tag": "trial"}),
    ]


def test_create_with_consent_records_it(owner_api):
    response = owner_api.post(CONTACTS, {"email": "no@example.com", "unsubscribed": True}, format="json")
    assert response.status_code == 201
    assert response.json()["unsubscribed"] is True
    change = ConsentChange.objects.get(contact_id=response.json()["id"])
    assert (change.channel, change.opted_out, change.source) == ("email", True, "api")


def test_create_refuses_a_duplicate_email_naming_it(owner_api, account, other_account):
    ContactFactory(account=other_account, email="same@example.com")  # another account's is no conflict
    assert owner_api.post(CONTACTS, {"email": "same@example.com"}, format="json").status_code == 201
    body = assert_problem(owner_api.post(CONTACTS, {"email": "same@example.com"}, format="json"), 400)
    assert error_fields(body) == ["email"]
    assert Contact.objects.filter(account=account).count() == 1


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"email": "nope"}, "email"),
        ({"phone": "1" * 40}, "phone"),
        ({"phone": "1" * 16}, "phone"),
        ({"phone": "call me"}, "phone"),
        ({"phone": "+1 555 O1O 0000"}, "phone"),  # letter O for zero
        ({"custom_fields": [1]}, "custom_fields"),
        ({"tags": "vip"}, "tags"),
        ({"tags": ["\x07bell"]}, "tag"),
        ({"first_name": None}, "first_name"),
        ({"unsubscribed": "perhaps"}, "unsubscribed"),
        ({"account": 5}, "account"),
        ({"id": 5}, "id"),
    ],
)
def test_create_refuses_bad_bodies_naming_the_field(owner_api, payload, field):
    body = assert_problem(owner_api.post(CONTACTS, payload, format="json"), 400, type_=VALIDATION)
    assert field in error_fields(body), body
    assert not Contact.objects.exists()


def test_marketers_manage_contacts_viewers_do_not(api_as, contact):
    marketer, viewer = api_as("marketer"), api_as("viewer")
    assert marketer.post(CONTACTS, {"email": "m@example.com"}, format="json").status_code == 201
    body = assert_problem(viewer.post(CONTACTS, {"email": "v@example.com"}, format="json"), 403)
    assert "manage_contacts" in body["detail"]
    assert_problem(viewer.patch(detail(contact), {"first_name": "X"}, format="json"), 403)
    assert_problem(viewer.delete(detail(contact)), 403)
    assert_problem(viewer.post(f"{detail(contact)}/tags", {"tag": "x"}, format="json"), 403)
    assert_problem(viewer.delete(f"{detail(contact)}/tags/x"), 403)
    contact.refresh_from_db()
    assert contact.first_name == "Ada"


@pytest.mark.parametrize("method", ["get", "post", "patch", "put", "delete"])
def test_every_contact_endpoint_needs_a_token(anonymous, contact, method):
    for path in (CONTACTS, detail(contact), f"{detail(contact)}/tags", f"{detail(contact)}/tags/x"):
        response = getattr(anonymous, method)(path, {}, format="json")
        assert response.status_code in (401, 405), (path, method)
        if response.status_code == 401:
            assert_problem(response, 401)
    assert Contact.objects.count() == 1


# --- Read, and another account's contact ------------------------------------------------------


def test_read(owner_api, contact):
    body = owner_api.get(detail(contact)).json()
    assert body["id"] == contact.pk
    assert body["email"] == contact.email


def _requests(contact_id: int) -> list[tuple[str, str, dict | None]]:
    path = detail(contact_id)
    return [
        ("get", path, None),
        ("patch", path, {"first_name": "Mallory"}),
        ("put", path, {"email": "", "phone": "", "first_name": "M", "last_name": "", "custom_fields": {}}),
        ("delete", path, None),
        ("post", f"{path}/tags", {"tag": "stolen"}),
        ("delete", f"{path}/tags/vip", None),
    ]


def test_another_accounts_contact_is_byte_identical_to_a_missing_one(owner_api, other_account):
    theirs = ContactFactory(account=other_account, tags=["vip"])
    missing_id = theirs.pk + 10_000
    for (method, path, data), (_, missing_path, _) in zip(_requests(theirs.pk), _requests(missing_id), strict=True):
        foreign = getattr(owner_api, method)(path, data, format="json")
        absent = getattr(owner_api, method)(missing_path, data, format="json")
        assert_problem(foreign, 404)
        assert foreign.content == absent.content, (method, path)
        assert dict(foreign.headers) == dict(absent.headers)
    theirs.refresh_from_db()
    assert (theirs.first_name, theirs.tags) == ("Ada", ["vip"])


def test_ids_too_large_for_the_database_are_simply_not_found(owner_api):
    assert_problem(owner_api.get(detail("9" * 30)), 404)
    assert_problem(owner_api.get(detail("9" * 18)), 404)


# --- Update -----------------------------------------------------------------------------------


def test_patch_changes_only_what_is_given_and_merges_custom_fields(owner_api, account, published):
    contact = ContactFactory(account=account, custom_fields={"plan": "free", "city": "Paris"})
    response = owner_api.patch(detail(contact), {"last_name": "Byron", "custom_fields": {"plan": "pro"}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["first_name"], body["last_name"]) == ("Ada", "Byron")
    assert body["custom_fields"] == {"plan": "pro", "city": "Paris"}
    assert [e.name for e in published] == ["contact.updated"]


def test_patch_consent_is_recorded_as_a_consent_change(owner_api, contact):
    response = owner_api.patch(detail(contact), {"sms_opted_out": True}, format="json")
    assert response.json()["sms_opted_out"] is True
    change = ConsentChange.objects.get(contact=contact)
    assert (change.channel, change.opted_out, change.source) == ("sms", True, "api")
    owner_api.patch(detail(contact), {"sms_opted_out": True}, format="json")
    assert ConsentChange.objects.filter(contact=contact).count() == 1  # repeating changes nothing


def test_put_replaces_the_profile(owner_api, account):
    contact = ContactFactory(account=account, custom_fields={"plan": "free"}, tags=["vip"], unsubscribed=True)
    replacement = {
        "email": "new@example.com",
        "phone": "",
        "first_name": "Augusta",
        "last_name": "King",
        "custom_fields": {"city": "London"},
    }
    body = owner_api.put(detail(contact), replacement, format="json").json()
    assert body["custom_fields"] == {"city": "London"}
    assert body["phone"] == ""
    assert body["tags"] == ["vip"]  # tags change only through their endpoints
    assert body["unsubscribed"] is True  # consent changes only when given


def test_put_needs_every_profile_field(owner_api, contact):
    body = assert_problem(owner_api.put(detail(contact), {"first_name": "X"}, format="json"), 400)
    assert set(error_fields(body)) == {"email", "phone", "last_name", "custom_fields"}
    contact.refresh_from_db()
    assert contact.first_name == "Ada"


def test_tags_cannot_be_patched_and_the_error_says_where_they_change(owner_api, contact):
    body = assert_problem(owner_api.patch(detail(contact), {"tags": ["x"]}, format="json"), 400)
    assert error_fields(body) == ["tags"]
    assert "/tags" in body["errors"][0]["message"]


def test_patch_refuses_a_taken_email_and_keeps_the_contact(owner_api, account):
    ContactFactory(account=account, email="taken@example.com")
    contact = ContactFactory(account=account, email="mine@example.com")
    body = assert_problem(owner_api.patch(detail(contact), {"email": "taken@example.com"}, format="json"), 400)
    assert error_fields(body) == ["email"]
    contact.refresh_from_db()
    assert contact.email == "mine@example.com"


# --- Delete -------------------------------------------------------------------------------------


def test_delete(owner_api, contact, published):
    response = owner_api.delete(detail(contact))
    assert response.status_code == 204
    assert response.content == b""
    assert not Contact.objects.filter(pk=contact.pk).exists()
    assert [(e.name, e.contact_id) for e in published] == [("contact.deleted", contact.pk)]
    assert_problem(owner_api.get(detail(contact)), 404)


# --- Tags ----------------------------------------------------------------------------------------


def test_adding_a_tag_emits_tag_added_once(owner_api, contact, published):
    first = owner_api.post(f"{detail(contact)}/tags", {"tag": " VIP "}, format="json")
    assert first.status_code == 201
    assert first.json()["tags"] == ["vip"]
    again = owner_api.post(f"{detail(contact)}/tags", {"tag": "vip"}, format="json")
    assert again.status_code == 200
    assert [(e.name, e.data) for e in published] == [("tag.added", {"tag": "vip"})]


def test_removing_a_tag_emits_tag_removed(owner_api, account, published):
    contact = ContactFactory(account=account, tags=["vip", "trial"])
    response = owner_api.delete(f"{detail(contact)}/tags/VIP")
    assert response.status_code == 200
    assert response.json()["tags"] == ["trial"]
    assert owner_api.delete(f"{detail(contact)}/tags/vip").status_code == 200  # already gone: nothing happens
    assert [(e.name, e.data) for e in published] == [("tag.removed", {"tag": "vip"})]


def test_tags_with_spaces_and_slashes_in_the_path(owner_api, account):
    contact = ContactFactory(account=account, tags=["spring sale/2026"])
    response = owner_api.delete(f"{detail(contact)}/tags/spring%20sale%2F2026")
    assert response.status_code == 200
    assert response.json()["tags"] == []


@pytest.mark.parametrize(("payload", "field"), [({}, "tag"), ({"tag": ""}, "tag"), ({"tag": "x" * 65}, "tag")])
def test_a_bad_tag_is_a_400_naming_it(owner_api, contact, payload, field):
    body = assert_problem(owner_api.post(f"{detail(contact)}/tags", payload, format="json"), 400)
    assert error_fields(body) == [field]


def test_a_contact_deleted_while_the_request_runs_is_a_404(owner_api, contact, monkeypatch):
    """The view found it, then the service did not (a concurrent delete): 404, not 500."""
    from contacts.api import views

    original = views.contact_add_tag

    def vanished(**kwargs):
        Contact.objects.filter(pk=contact.pk).delete()
        return original(**kwargs)

    monkeypatch.setattr(views, "contact_add_tag", vanished)
    assert_problem(owner_api.post(f"{detail(contact)}/tags", {"tag": "x"}, format="json"), 404)


# --- Consent inside an update: one change, applied before its events --------------------------

SUBSCRIBED_ONLY = [{"field": "unsubscribed", "op": "equals", "value": False}]
EMAIL_STEP = {"action_type": "send_email", "config": {"subject": "s", "text": "t"}}


@pytest.fixture
def contact_state_at_emit():
    """What a subscriber finds in the database when each event is published (it runs in the writer's transaction)."""
    seen: list[tuple[str, bool, int]] = []

    def look(event: events.ContactEvent) -> None:
        if event.name in (events.CONTACT_CREATED, events.CONTACT_UPDATED):
            unsubscribed = Contact.objects.values_list("unsubscribed", flat=True).get(pk=event.contact_id)
            seen.append((event.name, unsubscribed, ConsentChange.objects.filter(contact_id=event.contact_id).count()))

    events.subscribe(look)
    yield seen
    events._subscribers.remove(look)


@pytest.mark.django_db(transaction=True)  # it runs the triggered run's step: a claim commits on its own
def test_patch_with_consent_applies_it_before_contact_updated_so_triggered_runs_see_it(
    owner_api, account, contact_state_at_emit, mailoutbox
):
    from tests.integration.workflows.support import log_rows, make_workflow, run_due_jobs
    from workflows.infrastructure.models import WorkflowExecution

    updated = {"type": "event", "event": "contact.updated"}
    for_subscribed = make_workflow(account, [EMAIL_STEP], trigger={**updated, "filter": SUBSCRIBED_ONLY})
    for_everyone = make_workflow(account, [EMAIL_STEP], trigger=updated)
    contact = ContactFactory(account=account)
    response = owner_api.patch(detail(contact), {"first_name": "Grace", "unsubscribed": True}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["first_name"], response.json()["unsubscribed"]) == ("Grace", True)
    change = ConsentChange.objects.get(contact=contact)
    assert (change.channel, change.opted_out, change.source) == ("email", True, "api")
    # contact.updated was published with the consent (and its record) already in place...
    assert contact_state_at_emit == [("contact.updated", True, 1)]
    # ...so a workflow for subscribed contacts only did not start, and the other one's email is skipped.
    assert not WorkflowExecution.objects.filter(workflow=for_subscribed).exists()
    run = WorkflowExecution.objects.get(workflow=for_everyone)
    run_due_jobs()
    assert log_rows(run) == [(0, "send_email", 1, "skipped")]
    assert mailoutbox == []


def test_post_with_consent_applies_it_before_contact_created(owner_api, account, contact_state_at_emit):
    from tests.integration.workflows.support import make_workflow
    from workflows.infrastructure.models import WorkflowExecution

    trigger = {"type": "event", "event": "contact.created", "filter": SUBSCRIBED_ONLY}
    make_workflow(account, [EMAIL_STEP], trigger=trigger)
    response = owner_api.post(CONTACTS, {"email": "new@example.com", "unsubscribed": True}, format="json")
    assert response.status_code == 201, response.content
    assert contact_state_at_emit == [("contact.created", True, 1)]
    assert not WorkflowExecution.objects.exists()


@pytest.mark.parametrize("consent", [{"unsubscribed": True}, {"unsubscribed": True, "sms_opted_out": True}])
def test_a_patch_refused_in_one_part_stores_no_part(owner_api, account, published, consent):
    ContactFactory(account=account, email="taken@example.com")
    contact = ContactFactory(account=account, email="mine@example.com")
    before = Contact.objects.values().get(pk=contact.pk)
    body = {"first_name": "Grace", "email": "taken@example.com", **consent}
    assert error_fields(assert_problem(owner_api.patch(detail(contact), body, format="json"), 400)) == ["email"]
    assert Contact.objects.values().get(pk=contact.pk) == before
    assert not ConsentChange.objects.filter(contact=contact).exists()
    assert published == []


def test_a_phone_is_stored_in_one_spelling(owner_api):
    created = owner_api.post(CONTACTS, {"phone": " +1 (555) 010-0042 "}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["phone"] == "+15550100042"
    changed = owner_api.patch(f"{CONTACTS}/{created.json()['id']}", {"phone": "555.010.0043"}, format="json")
    assert changed.json()["phone"] == "5550100043"
    assert Contact.objects.get().phone == "5550100043"


def test_a_phone_stored_before_phones_were_checked_may_be_sent_back_but_not_changed_to_another(owner_api, account):
    contact = ContactFactory(account=account, phone="ask reception", first_name="Ada")
    profile = {
        "email": contact.email,
        "phone": "ask reception",
        "first_name": "Ada L.",
        "last_name": "",
        "custom_fields": {},
    }
    response = owner_api.put(detail(contact), profile, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["first_name"] == "Ada L."
    body = assert_problem(owner_api.put(detail(contact), {**profile, "phone": "ask the porter"}, format="json"), 400)
    assert error_fields(body) == ["phone"]
    contact.refresh_from_db()
    assert (contact.phone, contact.first_name) == ("ask reception", "Ada L.")


# --- The contact's clock ----------------------------------------------------------------------------
def test_a_contacts_time_zone_is_set_spelled_one_way_and_shown_with_where_it_came_from(owner_api, account):
    account.time_zone = "America/Chicago"
    account.save()
    made = owner_api.post(CONTACTS, {"email": "tz@example.com", "time_zone": "europe/paris"}, format="json")
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["time_zone"] == "Europe/Paris"
    assert body["resolved_time_zone"] == {"time_zone": "Europe/Paris", "source": "contact"}
    # Cleared: the phone number's region says where it rings; a toll-free number says nothing.
    changed = owner_api.patch(detail(body["id"]), {"time_zone": "", "phone": "+1 212 555 0123"}, format="json")
    assert changed.json()["resolved_time_zone"] == {"time_zone": "America/New_York", "source": "phone"}
    changed = owner_api.patch(detail(body["id"]), {"phone": "+1 800 555 0123"}, format="json")
    assert changed.json()["resolved_time_zone"] == {"time_zone": "America/Chicago", "source": "account"}
    listed = owner_api.get(CONTACTS).json()["results"][0]
    assert listed["resolved_time_zone"] == {"time_zone": "America/Chicago", "source": "account"}
    assert owner_api.get(detail(body["id"])).json()["time_zone"] == ""


def test_a_time_zone_that_is_none_is_refused_naming_it_and_nothing_is_stored(owner_api, contact):
    body = assert_problem(
        owner_api.patch(detail(contact), {"time_zone": "Mars/Olympus", "first_name": "New"}, format="json"),
        400,
        type_=VALIDATION,
    )
    assert error_fields(body) == ["time_zone"]
    assert "IANA time zone" in body["errors"][0]["message"]
    contact.refresh_from_db()
    assert (contact.time_zone, contact.first_name) == ("", "Ada")
    body = assert_problem(owner_api.post(CONTACTS, {"email": "x@example.com", "time_zone": 5}, format="json"), 400)
    assert error_fields(body) == ["time_zone"]


def test_put_keeps_a_time_zone_it_does_not_name(owner_api, contact):
    contact.time_zone = "Asia/Tokyo"
    contact.save()
    replaced = owner_api.put(
        detail(contact),
        {"email": contact.email, "phone": "", "first_name": "A", "last_name": "B", "custom_fields": {}},
        format="json",
    )
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["time_zone"] == "Asia/Tokyo"
