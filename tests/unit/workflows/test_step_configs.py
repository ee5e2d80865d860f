"""Step configs are checked when a workflow is saved; every error names its path and the reason."""

from datetime import time

import pytest

from workflows.domain.actions import parse_duration
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.triggers import Reenrollment, TriggerType
from workflows.domain.validation import ValidationContext
from workflows.domain.workflow import parse_definition, parse_steps
from workflows.steps.add_tag.config import TagConfig
from workflows.steps.send_email.config import SendEmailConfig
from workflows.steps.update_contact.config import UpdateContactConfig
from workflows.steps.wait.config import WaitConfig
from workflows.steps.webhook.config import WebhookConfig


def fake_check(source: str) -> str | None:
    """Stands in for the template engine: an unclosed tag does not compile."""
    return "unclosed tag" if source.count("{{") != source.count("}}") else None


CONTEXT = ValidationContext(
    check_template=fake_check, contact_fields=frozenset({"email", "phone", "first_name", "last_name"})
)


def errors_of(steps) -> dict[str, list[str]]:
    with pytest.raises(WorkflowValidationError) as info:
        parse_steps(steps, CONTEXT)
    return info.value.as_dict()


def one(action_type: str, **config):
    return parse_steps([{"action_type": action_type, "config": config}], CONTEXT)[0]


def test_a_valid_workflow_of_every_action():
    steps = parse_steps(
        [
            {
                "name": "Welcome",
                "action_type": "send_email",
                "config": {"subject": "Hi {{ contact.first_name }}", "text": "Hello", "html": "<p>Hello</p>"},
            },
            {"action_type": "send_sms", "config": {"body": "Hi"}},
            {"action_type": "send_voice", "config": {"message": "Hello"}},
            {"action_type": "send_voice", "config": {"recording_url": "https://cdn.example.com/a.mp3"}},
            {
                "action_type": "webhook",
                "config": {
                    "url": "https://crm.example.com/hook",
                    "method": "PUT",
                    "headers": {"X-Token": "abc"},
                    "body": {"id": "{{ contact.id }}"},
                },
            },
            {"action_type": "wait", "config": {"duration": "2d 12h"}},
            {"action_type": "wait", "config": {"until": "2026-12-01T09:00:00Z"}},
            {
                "action_type": "update_contact",
                "config": {"fields": {"first_name": "Ada"}, "custom_fields": {"plan": "pro", "score": 5}},
            },
            {"action_type": "add_tag", "config": {"tag": " VIP ", "max_attempts": 5, "base_delay": 2}},
            {"action_type": "remove_tag", "config": {"tag": "trial"}},
        ],
        CONTEXT,
    )
    assert [s.action_type for s in steps] == [
        "send_email", "send_sms", "send_voice", "send_voice", "webhook", "wait", "wait", "update_contact",
        "add_tag", "remove_tag",
    ]  # fmt: skip
    assert steps[0].config == SendEmailConfig("Hi {{ contact.first_name }}", "Hello", "<p>Hello</p>")
    assert steps[0].label == "Welcome"
    assert steps[1].label == "send_sms"
    assert steps[4].config == WebhookConfig(
        url="https://crm.example.com/hook", method="PUT", headers=(("X-Token", "abc"),), body={"id": "{{ contact.id }}"}
    )
    assert steps[5].config == WaitConfig(seconds=216000.0)
    assert steps[7].config == UpdateContactConfig(
        fields=(("first_name", "Ada"),), custom_fields=(("plan", "pro"), ("score", 5))
    )
    assert steps[8].config == TagConfig(tag="vip")  # normalized by contacts' rule
    assert (steps[8].retry.max_attempts, steps[8].retry.base_delay) == (5, 2.0)
    assert steps[9].index == 9


def test_an_unknown_action_type_is_refused_at_save():
    errors = errors_of([{"action_type": "send_fax", "config": {}}])
    assert list(errors) == ["steps[0].action_type"]
    assert "must be one of: send_email" in errors["steps[0].action_type"][0]


def test_errors_name_their_paths_and_all_are_reported():
    errors = errors_of(
        [
            {"action_type": "add_tag", "config": {"tag": "ok"}},
            {"action_type": "send_email", "config": {"text": "x"}},
            {"action_type": "webhook", "config": {"url": "ftp://example.com/x", "method": "TRACE"}},
            {"action_type": "wait", "config": {}},
        ]
    )
    assert errors["steps[1].config.subject"] == ["is required"]
    assert errors["steps[2].config.url"] == ["must be an http:// or https:// URL"]
    assert "must be one of: POST" in errors["steps[2].config.method"][0]
    assert "exactly one of `duration`" in errors["steps[3].config"][0]


@pytest.mark.parametrize(
    ("action_type", "config", "path", "reason"),
    [
        (
            "send_email",
            {"subject": "Hi {{ contact.first_name", "text": "x"},
            "steps[0].config.subject",
            "template error: unclosed tag",
        ),
        ("send_email", {"subject": "s", "text": "t", "cc": "x"}, "steps[0].config.cc", "is not a known setting"),
        ("send_email", {"subject": 5, "text": "t"}, "steps[0].config.subject", "must be a string"),
        ("send_sms", {}, "steps[0].config.body", "is required"),
        ("send_sms", {"body": "x" * 1601}, "steps[0].config.body", "at most 1600"),
        (
            "send_voice",
            {"message": "a", "recording_url": "https://x.example/a.mp3"},
            "steps[0].config",
            "exactly one of",
        ),
        ("send_voice", {"recording_url": "file:///etc/passwd"}, "steps[0].config.recording_url", "http"),
        ("webhook", {}, "steps[0].config.url", "is required"),
        ("webhook", {"url": "https://"}, "steps[0].config.url", "must name a host"),
        ("webhook", {"url": "{{ trigger.url }}"}, "steps[0].config.url", "fixed host"),
        ("webhook", {"url": "https://x.example/a b"}, "steps[0].config.url", "spaces"),
        (
            "webhook",
            {"url": "https://x.example", "headers": {"Bad Name": "x"}},
            "steps[0].config.headers.Bad Name",
            "not a valid HTTP header name",
        ),
        (
            "webhook",
            {"url": "https://x.example", "headers": {"Webhook-Signature": "x"}},
            "steps[0].config.headers.Webhook-Signature",
            "cannot be overridden",
        ),
        (
            "webhook",
            {"url": "https://x.example", "headers": {"X-A": "a\nb"}},
            "steps[0].config.headers.X-A",
            "one line",
        ),
        (
            "webhook",
            {"url": "https://x.example", "headers": {"Authorization": " Bearer secret-value"}},
            "steps[0].config.headers.Authorization",
            "must not start or end with a space or tab",
        ),
        (
            "webhook",
            {"url": "https://x.example", "headers": {"X-Name": "Ren\u00e9e \u2603"}},
            "steps[0].config.headers.X-Name",
            "Latin-1",
        ),
        (
            "webhook",
            {"url": "https://x.example", "body": {"a": ["{{ x"]}},
            "steps[0].config.body.a[0]",
            "template error",
        ),
        ("webhook", {"url": "https://x.example", "body": {"a": float("nan")}}, "steps[0].config.body", "plain JSON"),
        ("wait", {"duration": -3}, "steps[0].config.duration", "more than 0"),
        ("wait", {"duration": "soon"}, "steps[0].config.duration", "number of seconds"),
        ("wait", {"duration": 400 * 86400}, "steps[0].config.duration", "at most 366 days"),
        ("wait", {"until": "2026-12-41T09:00:00"}, "steps[0].config.until", "ISO 8601"),
        ("wait", {"until": "next tuesday"}, "steps[0].config.until", "ISO 8601"),
        ("wait", {"time_of_day": "25:00"}, "steps[0].config.time_of_day", "HH:MM"),
        ("wait", {"time_of_day": "9am"}, "steps[0].config.time_of_day", "HH:MM"),
        ("wait", {"time_of_day": "09:00", "until": "2026-12-01"}, "steps[0].config", "exactly one of"),
        ("wait", {"time_of_day": "09:00", "time_zone": "Mars/Olympus"}, "steps[0].config.time_zone", "IANA"),
        ("wait", {"duration": "3h", "time_zone": "contact"}, "steps[0].config.time_zone", "a duration"),
        ("update_contact", {}, "steps[0].config", "needs `fields` or `custom_fields`"),
        (
            "update_contact",
            {"fields": {"unsubscribed": "false"}},
            "steps[0].config.fields.unsubscribed",
            "not a contact field",
        ),
        ("update_contact", {"fields": {"first_name": 3}}, "steps[0].config.fields.first_name", "must be a string"),
        (
            "update_contact",
            {"custom_fields": {"9lives": 1}},
            "steps[0].config.custom_fields.9lives",
            "custom field name",
        ),
        ("add_tag", {}, "steps[0].config.tag", "is required"),
        ("add_tag", {"tag": "x" * 65}, "steps[0].config.tag", "at most 64"),
        ("remove_tag", {"tag": "   "}, "steps[0].config.tag", "must not be blank"),
        ("add_tag", {"tag": "a", "max_attempts": 0}, "steps[0].config.max_attempts", "between 1 and 20"),
        ("add_tag", {"tag": "a", "max_attempts": 2.5}, "steps[0].config.max_attempts", "whole number"),
        ("add_tag", {"tag": "a", "base_delay": "fast"}, "steps[0].config.base_delay", "must be a number"),
        ("add_tag", {"tag": "a", "base_delay": 7200}, "steps[0].config.base_delay", "3600"),
    ],
)
def test_config_errors(action_type, config, path, reason):
    errors = errors_of([{"action_type": action_type, "config": config}])
    assert path in errors, errors
    assert any(reason in message for message in errors[path]), errors[path]


def test_step_shape_errors():
    assert errors_of("nope") == {"steps": ["must be a list of steps"]}
    assert errors_of([5]) == {"steps[0]": ["must be an object"], "steps[0].action_type": ["is required"]}
    errors = errors_of([{"action_type": "add_tag", "config": {"tag": "a"}, "colour": "red"}])
    assert list(errors) == ["steps[0].colour"]
    assert errors_of([{"action_type": "add_tag", "config": [1]}]) == {
        "steps[0].config": ["must be an object"],
        "steps[0].config.tag": ["is required"],
    }


def test_templated_webhook_url_keeps_a_fixed_host():
    step = one("webhook", url="https://crm.example.com/contacts/{{ contact.id }}")
    assert step.config.url.endswith("{{ contact.id }}")


def test_a_wait_reads_a_date_or_a_time_of_day_on_a_clock():
    assert one("wait", time_of_day="9:00").config == WaitConfig(time_of_day=time(9, 0), time_zone="contact")
    assert one("wait", until="2026-12-01T09:00", time_zone="account").config.time_zone == "account"
    assert one("wait", until="2026-12-01", time_zone="Europe/Paris").config.until == "2026-12-01"
    assert one("wait", until="2026-12-01T09:00:00Z").config.time_zone == "contact"  # an offset wins when it runs


def test_templated_wait_until_is_checked_when_the_step_runs():
    assert one("wait", until="{{ trigger.appointment_at }}").config.until == "{{ trigger.appointment_at }}"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("3h", 10800.0),
        ("2d 12h", 216000.0),
        ("1w", 604800.0),
        ("1h30m", 5400.0),
        ("0.5", 0.5),
        ("", None),
        ("h", None),
        ("3 parsecs", None),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_a_whole_definition_with_trigger_and_rule():
    definition = parse_definition(
        trigger={
            "type": "event",
            "event": "tag.added",
            "tag": " VIP ",
            "filter": [{"field": "custom_fields.plan", "op": "equals", "value": "pro"}],
        },
        reenrollment="after_finish",
        steps=[{"action_type": "add_tag", "config": {"tag": "x"}}],
        context=CONTEXT,
    )
    assert definition.trigger.type is TriggerType.EVENT
    assert definition.trigger.tag == "vip"
    assert definition.reenrollment is Reenrollment.AFTER_FINISH


def test_a_definition_lists_trigger_rule_and_step_errors_together():
    with pytest.raises(WorkflowValidationError) as info:
        parse_definition(
            trigger={"type": "event", "filter": [{"field": "age", "op": "older", "value": None}]},
            reenrollment="sometimes",
            steps=[],
            context=CONTEXT,
        )
    errors = info.value.as_dict()
    assert "is required for an event trigger" in errors["trigger.event"][0]
    assert "must be one of" in errors["trigger.filter[0].field"][0]
    assert "must be one of" in errors["trigger.filter[0].op"][0]
    assert "must be one of: never, after_finish, always" in errors["reenrollment"][0]
    assert errors["steps"] == ["a workflow needs at least one step to be published"]


@pytest.mark.parametrize(
    ("trigger", "path", "reason"),
    [
        ({"type": "sometimes"}, "trigger.type", "must be one of"),
        ({"type": "event", "event": "bad name!"}, "trigger.event", "event name"),
        ({"type": "manual", "event": "x"}, "trigger.event", "only used by event triggers"),
        ({"type": "event", "event": "contact.created", "tag": "vip"}, "trigger.tag", "tag.added and tag.removed"),
        ({"type": "event", "event": "x", "filter": {"a": 1}}, "trigger.filter", "list of conditions"),
        (
            {"type": "event", "event": "x", "filter": [{"field": "tags", "op": "contains"}]},
            "trigger.filter[0].value",
            "is required",
        ),
        (
            {
                "type": "event",
                "event": "x",
                "filter": [{"field": "custom_fields.n", "op": "greater_than", "value": "a"}],
            },
            "trigger.filter[0].value",
            "must be a number",
        ),
        ({"type": "api", "extra": 1}, "trigger.extra", "not a known setting"),
        ({"type": "event", "event": "contact.deleted"}, "trigger.event", "cannot start a workflow"),
    ],
)
def test_trigger_errors(trigger, path, reason):
    with pytest.raises(WorkflowValidationError) as info:
        parse_definition(trigger=trigger, reenrollment=None, steps=[], context=CONTEXT, require_steps=False)
    errors = info.value.as_dict()
    assert path in errors, errors
    assert reason in errors[path][0]


def test_a_webhook_step_may_mark_names_secret():
    step = one("webhook", url="https://hooks.example.com/x", secrets=["X-Tenant", "customer_ref", "X-Tenant"])
    assert step.config == WebhookConfig(url="https://hooks.example.com/x", secrets=("X-Tenant", "customer_ref"))
    errors = errors_of(
        [{"action_type": "webhook", "config": {"url": "https://hooks.example.com/x", "secrets": ["ok", "a b", 7]}}]
    )
    assert set(errors) == {"steps[0].config.secrets[1]", "steps[0].config.secrets[2]"}
    errors = errors_of([{"action_type": "webhook", "config": {"url": "https://hooks.example.com/x", "secrets": "ref"}}])
    assert list(errors) == ["steps[0].config.secrets"]
