"""The rules a save applies beyond shapes: template variables, known events, webhook hosts; and version diffs."""

from workflows.domain.errors import WorkflowValidationError
from workflows.domain.templates import custom_field_warning, variable_problem
from workflows.domain.validation import Reader, ValidationContext
from workflows.domain.version_diff import diff_versions
from workflows.domain.workflow import parse_definition


def _context(**kwargs):
    def variables(text):
        # A stand-in for the renderer's list: `{{ a.b }}` -> ("a", "b"); enough for these rules.
        import re

        return [tuple(m.split(".")) for m in re.findall(r"\{\{\s*([\w.]+)", text)]

    return ValidationContext(
        check_template=lambda _t: None,
        contact_fields=frozenset({"first_name"}),
        template_variables=variables,
        **kwargs,
    )


def test_a_misspelt_contact_field_is_named_with_a_suggestion_and_the_known_ones():
    problem = variable_problem(("contact", "frist_name"))
    assert "contact has no 'frist_name'" in problem
    assert "Did you mean {{ contact.first_name }}?" in problem
    assert "contact.email" in problem


def test_known_variables_pass_and_free_ones_take_anything():
    for path in [("contact", "first_name"), ("trigger", "anything", "deep"), ("steps", "0", "json", "id"), ("event",)]:
        assert variable_problem(path) is None
    assert "names nothing" in variable_problem(("contatc", "email"))
    assert "is a text" in variable_problem(("event", "name"))


def test_a_custom_field_no_contact_has_is_a_warning_not_an_error():
    assert custom_field_warning(("custom", "plan"), frozenset({"plan"})) is None
    warning = custom_field_warning(("contact", "custom_fields", "pln"), frozenset({"plan"}))
    assert "no contact has the custom field 'pln'" in warning
    assert "plan" in warning


def test_a_step_with_an_unknown_variable_is_refused_at_its_path():
    steps = [{"action_type": "send_email", "config": {"subject": "Hi {{ contact.frist_name }}", "text": "x"}}]
    try:
        parse_definition(trigger={}, reenrollment="never", steps=steps, context=_context())
    except WorkflowValidationError as exc:
        assert [e.path for e in exc.errors] == ["steps[0].config.subject"]
    else:
        raise AssertionError("the typo was accepted")


def test_an_event_trigger_must_name_a_known_event_when_the_caller_lists_them():
    known = frozenset({"order.placed"})
    ok = Reader({"type": "event", "event": "order.placed"}, "trigger", _context(known_events=known))
    from workflows.domain.triggers import parse_trigger

    parse_trigger(ok)
    assert ok.errors == []
    builtin = Reader({"type": "event", "event": "tag.added"}, "trigger", _context(known_events=known))
    parse_trigger(builtin)
    assert builtin.errors == []
    typo = Reader({"type": "event", "event": "order.placd"}, "trigger", _context(known_events=known))
    parse_trigger(typo)
    assert typo.errors[0].path == "trigger.event"
    assert "known events: contact.created" in typo.errors[0].reason
    assert "order.placed" in typo.errors[0].reason
    unchecked = Reader({"type": "event", "event": "order.placd"}, "trigger", _context())
    parse_trigger(unchecked)
    assert unchecked.errors == []  # the API accepts any event name (it declares them)


def test_a_webhook_host_the_guard_refuses_is_refused_naming_the_setting():
    context = _context(check_webhook_target=lambda url: "127.0.0.1 is a loopback address" if "127." in url else None)
    steps = [
        {"action_type": "webhook", "config": {"url": "http://127.0.0.1:8000/hook"}},
        {"action_type": "webhook", "config": {"url": "http://127.0.0.1/{{ contact.id }}"}},
        {"action_type": "webhook", "config": {"url": "https://hooks.example.com/x"}},
    ]
    try:
        parse_definition(trigger={}, reenrollment="never", steps=steps, context=context)
    except WorkflowValidationError as exc:
        assert [e.path for e in exc.errors] == ["steps[0].config.url", "steps[1].config.url"]
        assert all("WEBHOOK_ALLOWED_HOSTS" in e.reason and "loopback" in e.reason for e in exc.errors)
    else:
        raise AssertionError("a loopback webhook was accepted")


def test_a_diff_names_what_changed_step_by_step():
    before = {
        "trigger": {"type": "event", "event": "tag.added", "tag": "vip", "filter": []},
        "reenrollment": "never",
        "steps": [
            {"name": "Hello", "action_type": "send_email", "config": {"subject": "Hi", "text": "a"}},
            {"name": "", "action_type": "wait", "config": {"duration": "1d"}},
        ],
    }
    after = {
        "trigger": {"type": "event", "event": "tag.added", "tag": "trial", "filter": []},
        "reenrollment": "never",
        "steps": [
            {"name": "Hello", "action_type": "send_email", "config": {"subject": "Welcome", "text": "a"}},
            {"name": "", "action_type": "add_tag", "config": {"tag": "x"}},
            {"name": "", "action_type": "wait", "config": {"duration": "2d"}},
        ],
    }
    changes = [(c.where, c.what, c.before, c.after) for c in diff_versions(before, after)]
    assert changes == [
        ("Trigger", "Tag", "vip", "trial"),
        ("Step 1 (Hello)", "subject", "Hi", "Welcome"),
        ("Step 2 (add_tag)", "action", "wait", "add_tag"),
        ("Step 3 (wait)", "added", "", "wait"),
    ]
    assert diff_versions(before, before) == []


def test_a_diff_matches_steps_by_key_and_says_what_moved_and_where_goals_changed():
    email = {"key": "welcome", "name": "Hello", "action_type": "send_email", "config": {"subject": "Hi", "text": "a"}}
    tag = {"key": "tag_it", "name": "", "action_type": "add_tag", "config": {"tag": "x"}}
    goal = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}], "then": "$end"}
    before = {"trigger": {}, "reenrollment": "never", "steps": [email, tag], "goals": [goal]}
    after = {
        "trigger": {},
        "reenrollment": "never",
        "steps": [{**tag, "next": "welcome"}, {**email, "config": {"subject": "Welcome", "text": "a"}}],
        "goals": [{**goal, "then": "tag_it"}, {"name": "Replied", "conditions": [], "then": "$end"}],
    }
    changes = [(c.where, c.what, c.before, c.after) for c in diff_versions(before, after)]
    assert changes == [
        ("Goal “Bought”", "then", "$end", "tag_it"),
        ("Goal “Replied”", "added", "", ""),
        ("Step tag_it (add_tag)", "position", "2", "1"),
        ("Step tag_it (add_tag)", "next step", "the next in order", "welcome"),
        ("Step welcome (Hello)", "position", "1", "2"),
        ("Step welcome (Hello)", "subject", "Hi", "Welcome"),
    ]
