"""What workflow responses show of webhook steps, and how hidden values survive a round trip. No database."""

from workflows.domain.redaction import REDACTED, restore_hidden, shown_step, shown_url

WEBHOOK = {
    "name": "hook",
    "action_type": "webhook",
    "config": {
        "url": "https://user:pw@hooks.example.com:8443/services/T0/B0/XyZsecret?sig=abc",
        "headers": {"Authorization": "Bearer s3cr3t-token", "Accept": "application/json", "X-Api-Key": "k-123"},
        "body": {"token": "tok-1", "note": "see https://example.com/reset?code=c-9", "list": [{"secret": "s"}]},
        "max_attempts": 5,
    },
}


def test_urls_are_cut_to_scheme_and_host():
    assert shown_url("https://hooks.example.com/services/T0/B0/secret") == "https://hooks.example.com/…"
    assert shown_url("https://user:pw@hooks.example.com:8443/x?y=1") == "https://hooks.example.com:8443/…"
    assert shown_url("https://api.example.com/orders/{{ trigger.id }}") == "https://api.example.com/…"
    assert shown_url("https://api.example.com") == "https://api.example.com"
    assert shown_url("https://api.example.com/") == "https://api.example.com/"


def test_a_webhook_step_shows_no_credential():
    config = shown_step(WEBHOOK)["config"]
    text = repr(config)
    for secret in ("user:pw", "XyZsecret", "sig=abc", "s3cr3t-token", "k-123", "tok-1", "c-9"):
        assert secret not in text, secret
    assert config["headers"] == {"Authorization": REDACTED, "Accept": "application/json", "X-Api-Key": REDACTED}
    assert config["body"]["token"] == REDACTED
    assert config["body"]["list"] == [{"secret": REDACTED}]
    assert config["body"]["note"] == "see https://example.com"
    assert config["max_attempts"] == 5
    assert WEBHOOK["config"]["headers"]["Authorization"] == "Bearer s3cr3t-token"  # the stored step is untouched


def test_other_actions_are_shown_as_they_are():
    step = {"name": "", "action_type": "send_email", "config": {"subject": "Bearer token-lookalike", "text": "x"}}
    assert shown_step(step) == step


def test_values_sent_back_as_shown_are_restored():
    shown = shown_step(WEBHOOK)
    shown["config"]["headers"]["X-New"] = "plain"
    restored, unresolved = restore_hidden([shown], [WEBHOOK])
    assert unresolved == []
    assert restored[0]["config"] == {**WEBHOOK["config"], "headers": {**WEBHOOK["config"]["headers"], "X-New": "plain"}}


def test_changed_values_are_taken_as_sent():
    shown = shown_step(WEBHOOK)
    shown["config"]["url"] = "https://other.example.com/new"
    shown["config"]["headers"]["Authorization"] = "Bearer new-token"
    shown["config"]["body"] = {"plain": True}
    restored, _ = restore_hidden([shown], [WEBHOOK])
    config = restored[0]["config"]
    assert config["url"] == "https://other.example.com/new"
    assert config["headers"]["Authorization"] == "Bearer new-token"
    assert config["body"] == {"plain": True}


def test_editing_one_body_value_keeps_the_hidden_others():
    shown = shown_step(WEBHOOK)
    shown["config"]["body"]["extra"] = 1
    shown["config"]["body"]["list"].append({"secret": "new-one"})
    restored, unresolved = restore_hidden([shown], [WEBHOOK])
    assert unresolved == []
    body = restored[0]["config"]["body"]
    assert body["token"] == "tok-1"
    assert body["note"] == WEBHOOK["config"]["body"]["note"]
    assert body["list"] == [{"secret": "s"}, {"secret": "new-one"}]
    assert body["extra"] == 1


def test_a_new_webhook_step_made_of_placeholders_is_refused_by_path():
    copied = shown_step(WEBHOOK)
    _, unresolved = restore_hidden([copied], [])
    assert [e.path for e in unresolved] == [
        "steps[0].config.url",
        "steps[0].config.headers.Authorization",
        "steps[0].config.headers.X-Api-Key",
        "steps[0].config.body.token",
        "steps[0].config.body.list[0].secret",
    ]


def test_a_placeholder_with_nothing_behind_it_is_reported_by_path():
    shown = shown_step(WEBHOOK)
    tag = {"action_type": "add_tag", "config": {"tag": "x"}}
    restored, unresolved = restore_hidden([tag, shown], [WEBHOOK])
    assert [e.path for e in unresolved] == [
        "steps[1].config.url",
        "steps[1].config.headers.Authorization",
        "steps[1].config.headers.X-Api-Key",
        "steps[1].config.body.token",
        "steps[1].config.body.list[0].secret",
    ]
    assert restored[0] == tag


def test_shapes_that_are_not_steps_pass_through_for_the_service_to_name():
    assert restore_hidden("nope", [WEBHOOK]) == ("nope", [])
    assert restore_hidden([1, None], [WEBHOOK]) == ([1, None], [])
