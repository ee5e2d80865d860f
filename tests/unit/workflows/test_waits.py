"""A wait for `contact.updated` on one field hears of that field only (plain rules, no database)."""

import pytest

from workflows.domain.errors import WorkflowValidationError
from workflows.domain.validation import ValidationContext
from workflows.domain.waits import event_matches, field_changed
from workflows.domain.workflow import parse_steps

PLAN = {"field": "custom_fields.plan"}


def updated(*changed: str, custom: list[str] | None = None) -> dict:
    data: dict = {"changed": list(changed)}
    if custom is not None:
        data["changed_custom_fields"] = custom
    return data


def test_a_wait_for_one_custom_field_ignores_a_change_of_another():
    assert not event_matches("contact.updated", updated("custom_fields", custom=["seats"]), PLAN, run_id="r")
    assert event_matches("contact.updated", updated("custom_fields", custom=["plan"]), PLAN, run_id="r")
    assert event_matches("contact.updated", updated("custom_fields", custom=["seats", "plan"]), PLAN, run_id="r")
    # a custom-fields change that names none (absent -> null) is no change of plan either
    assert not event_matches("contact.updated", updated("custom_fields", custom=[]), PLAN, run_id="r")
    assert not event_matches("contact.updated", updated("first_name"), PLAN, run_id="r")


def test_a_value_is_judged_only_once_the_watched_field_changed():
    match = {"field": "contact.custom_fields.plan", "value": "pro"}
    pro = {"custom_fields": {"plan": "pro", "seats": 3}}
    assert not event_matches(
        "contact.updated", updated("custom_fields", custom=["seats"]), match, run_id="r", contact=pro
    )
    assert event_matches("contact.updated", updated("custom_fields", custom=["plan"]), match, run_id="r", contact=pro)


@pytest.mark.parametrize(
    ("field", "data", "changed"),
    [
        ("first_name", updated("first_name"), True),
        ("contact.first_name", updated("first_name"), True),
        ("first_name", updated("custom_fields", custom=["first_name"]), False),
        ("custom_fields.first_name", updated("first_name"), False),
        ("email", updated("first_name", "custom_fields", custom=["email"]), False),
    ],
)
def test_contact_fields_and_custom_fields_are_told_apart(field, data, changed):
    assert field_changed(field, data) is changed


CONTEXT = ValidationContext(
    check_template=lambda source: None,
    contact_fields=frozenset({"email", "phone", "first_name", "last_name"}),
    check_watched_fields=True,
)


def wait_on(field: object) -> tuple:
    config = {"event": "contact.updated", "match": {"field": field}, "timeout": "1d", "on_timeout": "$end"}
    return parse_steps([{"action_type": "wait_for_event", "config": config}], CONTEXT)


@pytest.mark.parametrize("field", ["first_name", "contact.email", "custom_fields.plan", "contact.custom_fields.a b"])
def test_a_wait_may_watch_the_fields_the_builder_offers(field):
    (step,) = wait_on(field)
    assert step.config.match == {"field": field}


@pytest.mark.parametrize("field", ["plan", "custom_fields.", "tags", "consent.sms", "", 7])
def test_a_field_contact_updated_never_names_is_refused_naming_the_field(field):
    with pytest.raises(WorkflowValidationError) as info:
        wait_on(field)
    problems = info.value.as_dict()
    assert list(problems) == ["steps[0].config.match.field"], problems
    assert "custom_fields.<name>" in problems["steps[0].config.match.field"][0]


def test_a_version_published_before_the_check_still_loads():
    """Reading a published version checks no rule added since (definitions.frozen_context)."""
    reading = ValidationContext(check_template=lambda source: None, contact_fields=frozenset())
    config = {"event": "contact.updated", "match": {"field": "plan"}, "timeout": "1d", "on_timeout": "$end"}
    (step,) = parse_steps([{"action_type": "wait_for_event", "config": config}], reading)
    assert step.config.match == {"field": "plan"}
