"""Trigger matching and the contact filter."""

import pytest

from workflows.domain.triggers import ConditionOp, ContactCondition, Trigger, TriggerType

CONTACT = {
    "email": "ada@example.com",
    "phone": "",
    "first_name": "Ada",
    "last_name": "Lovelace",
    "tags": ["vip", "trial"],
    "custom_fields": {"plan": "Pro", "score": 42},
    "unsubscribed": False,
    "sms_opted_out": True,
}


def test_an_event_trigger_matches_its_event_only():
    trigger = Trigger(TriggerType.EVENT, event="order.paid")
    assert trigger.matches_event("order.paid", {})
    assert not trigger.matches_event("order.refunded", {})
    assert not Trigger(TriggerType.API).matches_event("order.paid", {})
    assert not Trigger(TriggerType.MANUAL).matches_event("order.paid", {})


def test_a_tag_trigger_can_watch_one_tag_or_any():
    one = Trigger(TriggerType.EVENT, event="tag.added", tag="vip")
    anyone = Trigger(TriggerType.EVENT, event="tag.added")
    assert one.matches_event("tag.added", {"tag": "vip"})
    assert not one.matches_event("tag.added", {"tag": "trial"})
    assert not one.matches_event("tag.removed", {"tag": "vip"})
    assert anyone.matches_event("tag.added", {"tag": "trial"})


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("tags", ConditionOp.CONTAINS, "VIP ", True),  # tags compare normalized
        ("tags", ConditionOp.CONTAINS, "customer", False),
        ("tags", ConditionOp.NOT_CONTAINS, "customer", True),
        ("custom_fields.plan", ConditionOp.EQUALS, "pro", True),  # text compares case-insensitively
        ("custom_fields.plan", ConditionOp.NOT_EQUALS, "pro", False),
        ("custom_fields.score", ConditionOp.GREATER_THAN, 40, True),
        ("custom_fields.score", ConditionOp.LESS_THAN, 40, False),
        ("custom_fields.plan", ConditionOp.GREATER_THAN, 1, False),  # not a number: no match
        ("custom_fields.missing", ConditionOp.IS_NOT_SET, None, True),
        ("phone", ConditionOp.IS_SET, None, False),
        ("email", ConditionOp.CONTAINS, "@EXAMPLE.com", True),
        ("sms_opted_out", ConditionOp.EQUALS, True, True),
        ("unsubscribed", ConditionOp.EQUALS, True, False),
    ],
)
def test_conditions(field, op, value, expected):
    assert ContactCondition(field, op, value).matches(CONTACT) is expected


def test_a_filter_matches_when_all_conditions_do():
    trigger = Trigger(
        TriggerType.EVENT,
        event="x",
        conditions=(
            ContactCondition("tags", ConditionOp.CONTAINS, "vip"),
            ContactCondition("custom_fields.plan", ConditionOp.EQUALS, "basic"),
        ),
    )
    assert not trigger.matches_contact(CONTACT)
    assert Trigger(TriggerType.EVENT, event="x").matches_contact(CONTACT)  # no filter: everyone


def test_a_trigger_round_trips_as_a_dict():
    trigger = Trigger(
        TriggerType.EVENT, event="tag.added", tag="vip", conditions=(ContactCondition("tags", ConditionOp.IS_SET),)
    )
    assert trigger.as_dict() == {
        "type": "event",
        "event": "tag.added",
        "tag": "vip",
        "filter": [{"field": "tags", "op": "is_set", "value": None}],
    }
