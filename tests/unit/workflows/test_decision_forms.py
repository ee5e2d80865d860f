"""The builder's forms for the steps that decide: what a marketer types becomes the CONTRACT's config, and a
stored config comes back into the same fields (no JSON on the everyday path). Forms only, no database."""

from django.http import QueryDict

from workflows.admin_forms.context import BuilderContext, StepRef
from workflows.admin_forms.steps import STEP_FORMS

BUILDER = BuilderContext(
    account_id=1,
    tags=("vip",),
    custom_fields=("plan",),
    known_events=("order.placed",),
    steps=(
        StepRef("welcome", "Welcome email", "send_email"),
        StepRef("check", "Clicked?", "branch"),
        StepRef("tag_engaged", "Tag engaged", "add_tag"),
        StepRef("reminder", "Reminder", "send_email"),
    ),
)


def bound(action_type, fields):
    data = QueryDict(mutable=True)
    for name, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            data.appendlist(f"s-{name}", item)
    return STEP_FORMS[action_type](data, prefix="s", builder=BUILDER)


def render(action_type, config):
    initial = STEP_FORMS[action_type].initial_from(config)
    assert initial is not None, "the form cannot show this config"
    return STEP_FORMS[action_type](prefix="s", initial=initial, builder=BUILDER).as_div()


BRANCH_FIELDS = {
    "branches-0-name": "Clicked",
    "branches-0-when-field": ["steps.welcome.clicked", "trigger.", ""],
    "branches-0-when-path": ["", "plan", ""],
    "branches-0-when-op": ["equals", "in", "equals"],
    "branches-0-when-value": ["true", "pro, team", ""],
    "branches-0-next": "tag_engaged",
    "branches-1-name": "Big spender",
    "branches-1-when-field": ["custom_fields.plan", "email"],
    "branches-1-when-path": ["", ""],
    "branches-1-when-op": ["greater_or_equal", "is_set"],
    "branches-1-when-value": ["100", ""],
    "branches-1-next": "$end",
    "default": "reminder",
}


def test_a_branch_is_built_from_its_condition_rows():
    form = bound("branch", BRANCH_FIELDS)
    assert form.is_valid(), form.errors
    assert form.to_config() == {
        "branches": [
            {
                "name": "Clicked",
                "conditions": [
                    {"field": "steps.welcome.clicked", "op": "equals", "value": True},
                    {"field": "trigger.plan", "op": "in", "value": ["pro", "team"]},
                ],
                "next": "tag_engaged",
            },
            {
                "name": "Big spender",
                "conditions": [
                    {"field": "custom_fields.plan", "op": "greater_or_equal", "value": 100},
                    {"field": "email", "op": "is_set", "value": None},
                ],
                "next": "$end",
            },
        ],
        "default": "reminder",
    }


def test_a_stored_branch_comes_back_into_its_rows():
    config = bound("branch", BRANCH_FIELDS)
    assert config.is_valid()
    html = render("branch", config.to_config())
    assert 'name="s-branches-0-name" value="Clicked"' in html
    assert 'name="s-branches-0-when-path" value="plan"' in html  # trigger.plan: "A value sent…" + plan
    assert '<option value="tag_engaged" selected>3. Tag engaged (tag_engaged)</option>' in html
    assert 'value="pro, team"' in html
    assert "Welcome email: a link was clicked" in html  # an earlier step's result, in words


def test_a_branch_says_plainly_what_is_missing():
    form = bound(
        "branch",
        {
            "branches-0-name": "Clicked",
            "branches-0-when-field": ["trigger.", ""],
            "branches-0-when-path": ["", ""],
            "branches-0-when-op": ["equals", "equals"],
            "branches-0-when-value": ["x", ""],
            "branches-0-next": "",
            "default": "",
        },
    )
    assert not form.is_valid()
    assert form.errors["branches"] == [
        "Branch 1 (“Clicked”): condition 1: type the name of the value after “trigger.”."
    ]
    assert form.errors["default"] == ["Choose where contacts go when no branch's conditions hold."]
    form = bound("branch", {**BRANCH_FIELDS, "branches-0-next": ""})
    assert not form.is_valid()
    assert form.errors["branches"] == ["Branch 1 (“Clicked”): choose the step this branch leads to."]


def test_a_split_needs_shares_that_add_up_to_100():
    fields = {"paths-name": ["A", "B"], "paths-weight": ["70", "30"], "paths-next": ["tag_engaged", "reminder"]}
    form = bound("split", fields)
    assert form.is_valid(), form.errors
    assert form.to_config() == {
        "paths": [{"name": "A", "weight": 70, "next": "tag_engaged"}, {"name": "B", "weight": 30, "next": "reminder"}]
    }
    assert 'value="70"' in render("split", form.to_config())
    form = bound("split", {**fields, "paths-weight": ["50", "49"]})
    assert not form.is_valid()
    assert form.errors["paths"] == ["The shares add up to 99%: they must add up to 100%."]
    form = bound("split", {**fields, "paths-weight": ["half", "50"]})
    assert form.errors["paths"] == ["Path 1 (“A”): the share is a whole number from 1 to 100."]


def test_a_wait_for_a_click_is_an_event_its_match_and_a_timeout():
    fields = {
        "event": "email.clicked",
        "email_step": "welcome",
        "link": "https://acme.example/pricing",
        "timeout_amount": "3",
        "timeout_unit": "days",
        "on_timeout": "reminder",
        "tag": "ignored",  # a field of another event is not part of this one
    }
    form = bound("wait_for_event", fields)
    assert form.is_valid(), form.errors
    config = form.to_config()
    assert config == {
        "event": "email.clicked",
        "match": {"step": "welcome", "link": "https://acme.example/pricing"},
        "timeout": "3d",
        "on_timeout": "reminder",
    }
    assert STEP_FORMS["wait_for_event"].initial_from(config) == {
        "event": "email.clicked",
        "email_step": "welcome",
        "link": "https://acme.example/pricing",
        "timeout_amount": 3,
        "timeout_unit": "days",
        "on_timeout": "reminder",
    }


def test_a_wait_for_a_custom_event_matches_conditions_on_its_data():
    fields = {
        "event": "order.placed",
        "event_conditions-field": ["event.", ""],
        "event_conditions-path": ["total", ""],
        "event_conditions-op": ["greater_than", "equals"],
        "event_conditions-value": ["50", ""],
        "timeout_amount": "2",
        "timeout_unit": "hours",
        "on_timeout": "$end",
    }
    form = bound("wait_for_event", fields)
    assert form.is_valid(), form.errors
    assert form.to_config() == {
        "event": "order.placed",
        "match": {"conditions": [{"field": "event.total", "op": "greater_than", "value": 50}]},
        "timeout": "2h",
        "on_timeout": "$end",
    }
    html = render("wait_for_event", form.to_config())
    assert '<option value="order.placed" selected>' in html


def test_a_wait_for_an_event_says_what_is_missing():
    form = bound("wait_for_event", {"event": "", "timeout_amount": "", "on_timeout": ""})
    assert not form.is_valid()
    assert form.errors["event"] == ["Choose what to wait for."]
    assert form.errors["timeout_amount"] == ["Say how long to wait at most, e.g. 3 days."]
    assert form.errors["on_timeout"] == ["Choose where contacts go when it has not happened in time."]


def test_end_has_nothing_to_fill_in():
    form = bound("end", {})
    assert form.is_valid()
    assert form.to_config() == {}
    assert STEP_FORMS["end"].initial_from({"x": 1}) is None  # shown as JSON rather than lost


def test_condition_rows_offer_every_operator_of_the_condition_language():
    from workflows.admin_forms.conditions import OPERATORS
    from workflows.domain.conditions import NO_VALUE_OPS, NUMERIC_OPS, ConditionOp

    assert set(OPERATORS) == {op.value for op in ConditionOp}
    assert {op for op, (_label, kind) in OPERATORS.items() if kind == "none"} == {op.value for op in NO_VALUE_OPS}
    assert {op for op, (_label, kind) in OPERATORS.items() if kind == "number"} == {op.value for op in NUMERIC_OPS}


def test_each_decision_of_the_log_reads_as_a_sentence():
    from workflows.admin_forms.summary import decision_words

    branch = {"kind": "branch", "branch": "VIP", "default": False, "values": {"tags": ["vip"]}, "next": "step_4"}
    assert decision_words(branch) == 'Took the branch “VIP” (tags = ["vip"]) → “step_4”'
    default = {"kind": "branch", "branch": None, "default": True, "values": {"tags": []}, "next": "$end"}
    assert decision_words(default) == "No branch's conditions held (tags = []): took the default → the end of the run"
    assert decision_words({"kind": "split", "bucket": 37, "path": "A", "next": "a"}) == (
        "Split: bucket 37 of 100, path “A” → “a”"
    )
    event = {"kind": "event", "event_id": "ev_1", "at": "2026-12-01T14:05:03.1+00:00"}
    assert decision_words(event) == (
        "The event it waited for happened at 1 Dec 2026, 14:05:03 UTC (event ev_1): on the “it happened” path"
    )
    assert decision_words({"kind": "timeout"}) == "Timed out: it did not happen in time: on the timed-out path"
    assert decision_words({"kind": "goal", "goal": "Bought", "next": "$end"}) == "Goal met: “Bought”: the run ended"
    assert decision_words({"kind": "end"}) == "Ended the run here (ended by step)"
    retry = {
        "kind": "retry",
        "by": {"user_id": 3, "via": "admin", "name": "ada"},
        "at": "2026-12-01T14:05:03+00:00",
        "loop_cap_reset": {"steps_before": 1000, "allowance": 1000},
        "next": "check",
    }
    assert decision_words(retry) == (
        "Retried by ada at 1 Dec 2026, 14:05:03 UTC: the loop cap was lifted after 1000 steps, 1000 more allowed"
        " → “check”"
    )
    by_api = {**retry, "by": {"user_id": 3, "via": "api", "prefix": "rk_ab12"}}
    assert decision_words(by_api).startswith("Retried by API token rk_ab12 at")


def test_every_field_the_builder_offers_to_watch_is_one_the_api_accepts():
    """The builder's field list and the API's check of `match.field` agree (workflows.domain.waits)."""
    from workflows.domain.validation import ValidationContext
    from workflows.domain.workflow import parse_steps

    context = ValidationContext(
        check_template=lambda source: None,
        contact_fields=frozenset({"email", "phone", "first_name", "last_name"}),
        check_watched_fields=True,
    )
    form = bound("wait_for_event", {"event": "contact.updated", "timeout_amount": "1", "on_timeout": "reminder"})
    offered = [value for _group, choices in form.fields["contact_field"].choices[1:] for value, _label in choices]
    assert "custom_fields.plan" in offered
    for field in offered:
        form = bound(
            "wait_for_event",
            {"event": "contact.updated", "contact_field": field, "timeout_amount": "1", "on_timeout": "$end"},
        )
        assert form.is_valid(), form.errors
        config = form.to_config()
        assert config["match"] == {"field": field}
        (step,) = parse_steps([{"action_type": "wait_for_event", "config": config}], context)
        assert step.config.match == {"field": field}
