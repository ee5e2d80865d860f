"""The one condition language: every operator on every kind of value, the paths it reads, and its checks."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from workflows.domain.conditions import (
    CONTACT_ROOTS,
    RUN_ROOTS,
    Condition,
    ConditionOp,
    Facts,
    parse_conditions,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FACTS = Facts(
    contact={
        "email": "Ann@Example.com",
        "phone": "",
        "first_name": "Ann",
        "tags": ["vip", "customer"],
        "unsubscribed": False,
        "sms_opted_out": True,
        "custom_fields": {"plan": "Pro", "score": 42, "signed_up": "2026-11-20", "empty": ""},
    },
    trigger={"order": {"total": "99.5", "items": [{"sku": "a1"}]}, "paid_at": "2026-12-01T09:00:00Z"},
    steps={"call_api": {"status_code": 201, "body": {"plan": "team", "flags": None}}, "welcome": {"opened": True}},
    now=NOW,
)
Op = ConditionOp


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("email", Op.EQUALS, "ann@example.com ", True),
        ("contact.first_name", Op.EQUALS, "ANN", True),
        ("custom_fields.plan", Op.NOT_EQUALS, "pro", False),
        ("custom_fields.score", Op.EQUALS, 42, True),
        ("steps.welcome.opened", Op.EQUALS, True, True),
        ("steps.welcome.opened", Op.EQUALS, 1, False),  # a boolean equals only a boolean
        ("tags", Op.CONTAINS, "VIP ", True),
        ("email", Op.CONTAINS, "@example", True),
        ("tags", Op.NOT_CONTAINS, "lead", True),
        ("custom_fields.empty", Op.IS_SET, None, False),
        ("custom_fields.empty", Op.EXISTS, None, True),
        ("custom_fields.missing", Op.IS_NOT_SET, None, True),
        ("custom_fields.missing", Op.NOT_EXISTS, None, True),
        ("steps.call_api.body.flags", Op.NOT_EXISTS, None, True),  # null counts as absent
        ("steps.ghost.body", Op.EXISTS, None, False),
        ("custom_fields.plan", Op.IN, ["free", "pro"], True),
        ("tags", Op.IN, ["lead", "vip"], True),  # a list matches when any of its items is in
        ("steps.call_api.body.plan", Op.NOT_IN, ["team"], False),
        ("custom_fields.score", Op.GREATER_THAN, 41, True),
        ("custom_fields.score", Op.LESS_THAN, 42, False),
        ("custom_fields.score", Op.GREATER_OR_EQUAL, 42, True),
        ("custom_fields.score", Op.LESS_OR_EQUAL, 41.9, False),
        ("trigger.order.total", Op.GREATER_THAN, 99, True),  # a text that is a number compares as one
        ("custom_fields.plan", Op.GREATER_THAN, 1, False),  # no number: no match
        ("steps.call_api.status_code", Op.GREATER_OR_EQUAL, 200, True),
        ("trigger.order.items.0.sku", Op.EQUALS, "A1", True),
        ("custom_fields.signed_up", Op.BEFORE, "2026-12-01", True),
        ("custom_fields.signed_up", Op.AFTER, "-3 days", False),
        ("custom_fields.signed_up", Op.AFTER, "-30 days", True),
        ("trigger.paid_at", Op.AFTER, "2026-12-01T08:59:59+00:00", True),
        ("trigger.paid_at", Op.BEFORE, "-1 hour", True),
        ("custom_fields.plan", Op.BEFORE, "2026-12-01", False),  # no date: no match
        ("consent.email", Op.EQUALS, True, True),
        ("consent.sms", Op.EQUALS, False, True),
    ],
)
def test_each_operator(field, op, value, expected):
    assert Condition(field, op, value).matches(FACTS) is expected


def test_a_bare_contact_mapping_is_read_as_the_contact():
    assert Condition("tags", Op.CONTAINS, "vip").matches({"tags": ["vip"]})


def test_lookup_gives_what_a_decision_logs():
    assert Condition("steps.call_api.body.plan", Op.EQUALS, "x").lookup(FACTS) == "team"
    assert Condition("custom_fields.missing", Op.IS_SET).lookup(FACTS) is None


def errors(raw, roots=RUN_ROOTS):
    found = []
    parse_conditions(raw, "c", found, roots=roots)
    return {e.path: e.reason for e in found}


def test_bad_conditions_name_their_paths():
    assert set(
        errors(
            [
                {"field": "nope", "op": "equals", "value": 1},
                {"field": "tags", "op": "bigger", "value": 1},
                {"field": "tags", "op": "in", "value": "vip"},
                {"field": "tags", "op": "greater_than", "value": "3"},
                {"field": "trigger.at", "op": "before", "value": "soonish"},
                {"field": "tags", "op": "equals"},
                {"field": "tags", "op": "is_set", "extra": 1},
                {"field": "steps.Bad Key.x", "op": "exists"},
            ]
        )
    ) == {
        "c[0].field",
        "c[1].op",
        "c[2].value",
        "c[3].value",
        "c[4].value",
        "c[5].value",
        "c[6].extra",
        "c[7].field",
    }


def test_each_use_reads_only_its_roots():
    assert errors([{"field": "trigger.plan", "op": "exists"}], roots=CONTACT_ROOTS) == {
        "c[0].field": errors([{"field": "trigger.plan", "op": "exists"}], roots=CONTACT_ROOTS)["c[0].field"]
    }
    assert "cannot be read here" in errors([{"field": "event.x", "op": "exists"}])["c[0].field"]
    assert errors([{"field": "trigger.plan", "op": "exists"}]) == {}


def test_a_date_without_an_offset_is_read_on_the_contacts_clock():
    """`renews before 2026-06-02` is that day on the contact's calendar: in Tokyo it began at 15:00 UTC on
    the 1st. An instant with an offset stays the instant it names; with no clock, UTC as before."""
    asked = []

    def tokyo():
        asked.append(1)
        return ZoneInfo("Asia/Tokyo")

    renews = {"custom_fields": {"renews": "2026-06-01T16:00:00Z", "local": "2026-06-01T23:30"}}
    before = Condition("custom_fields.renews", ConditionOp.BEFORE, "2026-06-02")
    assert before.matches(Facts(contact=renews))  # UTC: 16:00 on the 1st is before midnight on the 2nd
    assert not before.matches(Facts(contact=renews, clock=tokyo))  # Tokyo: the 2nd began at 15:00 UTC
    # A value without an offset is on that clock too: 23:30 in Tokyo is 14:30 UTC, before 15:00.
    assert Condition("custom_fields.local", ConditionOp.BEFORE, "2026-06-02").matches(
        Facts(contact=renews, clock=tokyo)
    )
    # Both with offsets: no clock is asked.
    asked.clear()
    exact = Condition("custom_fields.renews", ConditionOp.AFTER, "2026-06-01T15:00:00+00:00")
    assert exact.matches(Facts(contact=renews, clock=tokyo))
    assert asked == []
    # A DST gap: 02:30 on 8 March 2026 in New York is the jump (07:00 UTC).
    new_york = Facts(
        contact={"custom_fields": {"at": "2026-03-08T06:59:00Z"}}, clock=lambda: ZoneInfo("America/New_York")
    )
    assert Condition("custom_fields.at", ConditionOp.BEFORE, "2026-03-08T02:30").matches(new_york)
