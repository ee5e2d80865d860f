"""Templates see only read-only plain data and cannot load, include or debug; log data is bounded and redacted."""

import json
import time

import pytest

from workflows.domain.logs import RESPONSE_DATA_MAX_BYTES, bounded_response
from workflows.domain.templates import TemplateError, render_tree, template_context
from workflows.infrastructure.templates import renderer

CONTEXT = template_context(
    contact={
        "id": 7,
        "email": "ada@example.com",
        "phone": "+15550001",
        "first_name": "Ada",
        "last_name": "Lovelace",
        "tags": ["vip"],
        "custom_fields": {"plan": "pro"},
        "unsubscribed": True,
    },
    trigger={"order": {"id": "A-1", "items": [1, 2, 3]}, "html": "<b>x</b>"},
    steps=[{"json": {"id": 99}}],
    event="order.paid",
    workflow={"id": 3, "name": "Welcome"},
    run={"id": "r-1", "step": 2},
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Hi {{ contact.first_name }}", "Hi Ada"),
        ("{{ contact.full_name }}", "Ada Lovelace"),
        ("{{ contact.custom_fields.plan }}/{{ custom.plan }}", "pro/pro"),
        ("{{ trigger.order.id }} {{ trigger.order.items.2 }}", "A-1 3"),
        ("{{ steps.0.json.id }}", "99"),
        ("{{ event }} {{ workflow.name }} {{ run.id }}", "order.paid Welcome r-1"),
        ("{% if 'vip' in contact.tags %}VIP{% endif %}", "VIP"),
        ("{% for i in trigger.order.items %}{{ i }}{% endfor %}", "123"),
        ("{{ contact.nickname|default:'friend' }}", "friend"),
        ("{{ contact.first_name|upper }}", "ADA"),
        ("{{ trigger.html }}", "<b>x</b>"),  # text is never escaped
        ("{{ contact.unsubscribed }}", ""),  # consent flags are not template data
        ("no template here {", "no template here {"),
    ],
)
def test_text_rendering(source, expected):
    assert renderer.render_text(source, CONTEXT) == expected


def test_html_is_escaped():
    assert renderer.render_html("<p>{{ trigger.html }}</p>", CONTEXT) == "<p>&lt;b&gt;x&lt;/b&gt;</p>"


def test_the_context_is_read_only():
    assert renderer.render_text("{{ contact.custom_fields.clear }}{{ trigger.order.items.pop }}", CONTEXT) == ""
    assert renderer.render_text("{{ custom.plan }}", CONTEXT) == "pro"
    with pytest.raises(TypeError):
        CONTEXT["contact"]["first_name"] = "Eve"


@pytest.mark.parametrize(
    "source",
    [
        "{% load static %}",
        "{% include 'admin/base.html' %}",
        "{% extends 'admin/base.html' %}",
        "{% debug %}",
        "{% url 'admin:index' %}",
        "{% csrf_token %}",
        "{{ contact.__class__ }}",
        "{{ contact.first_name|nosuchfilter }}",
        "{% if %}",
    ],
)
def test_dangerous_or_broken_templates_do_not_compile(source):
    assert renderer.check(source)
    with pytest.raises(TemplateError):
        renderer.render_text(source, CONTEXT)


def test_a_good_template_compiles():
    assert renderer.check("Hi {{ contact.first_name|default:'there' }}") is None


@pytest.mark.parametrize(
    "source",
    [
        '{{ ""|ljust:"300000000" }}',
        '{{ "x"|rjust:"300000000" }}',
        '{{ "x"|center:"-300000000" }}',
        '{{ 1|stringformat:"300000000d" }}',
        '{{ 1|stringformat:".300000000f" }}',
        '{{ trigger.pair|stringformat:"*s" }}',
        '{{ 1|floatformat:"300000000" }}',
        '{% filter ljust:"300000000" %}x{% endfilter %}',
        '{% with x=""|ljust:"300000000" %}{{ x }}{% endwith %}',
    ],
)
def test_huge_widths_are_refused_when_the_template_is_checked(source):
    """A marketer's template must not make a worker allocate hundreds of megabytes: refused at save."""
    problem = renderer.check(source) or ""
    assert "is over the limit of 1,000" in problem or "(*)" in problem, problem


@pytest.mark.parametrize(
    ("source", "context", "reason"),
    [
        ("{{ x|ljust:trigger.width }}", {"x": "a", "trigger": {"width": 300_000_000}}, "ljust's width"),
        (
            "{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}",
            {"s": "x" * 1000},
            "loops ran more than",
        ),
        (
            "{% with a=s|add:s %}{% with b=a|add:a %}{% with c=b|add:b %}{% with d=c|add:c %}{% with e=d|add:d %}"
            "{{ e }}{% endwith %}{% endwith %}{% endwith %}{% endwith %}{% endwith %}",
            {"s": "x" * 60_000},
            "longer than",
        ),
        ("{% for c in s %}{{ s }}{% endfor %}", {"s": "x" * 5_000}, "rendered text is longer than"),
        ("{{ s|make_list|join:sep }}", {"s": "x" * 5_000, "sep": "y" * 1_000}, "join would build"),
    ],
)
def test_renders_that_would_grow_without_bound_stop_early(source, context, reason):
    with pytest.raises(TemplateError, match=reason):
        renderer.render_text(source, context)


def test_ordinary_widths_loops_and_filters_still_work():
    source = '{% for i in trigger.order.items %}{{ i|upper|ljust:"4" }}|{% endfor %}{{ 2.5|floatformat:"2" }}'
    assert renderer.check(source) is None
    assert renderer.render_text(source, {"trigger": {"order": {"items": ["a", "b"]}}}) == "A   |B   |2.50"


def test_render_tree_fills_every_string():
    tree = {"a": "{{ contact.first_name }}", "b": [1, "{{ event }}"], "{{ key }}": True}
    assert render_tree(tree, lambda s: renderer.render_text(s, CONTEXT)) == {
        "a": "Ada",
        "b": [1, "order.paid"],
        "{{ key }}": True,  # keys stay as written
    }


def test_response_data_is_redacted():
    data = bounded_response({"body": "see https://api.example.com/v1/reset?token=SECRET", "status_code": 200})
    assert data == {"body": "see https://api.example.com", "status_code": 200}


def test_response_data_is_bounded_by_cutting_long_texts():
    data = bounded_response(
        {"status_code": 200, "id": "m-1", "body": "x" * 5000, "json": {"k": "y" * 5000}, "more": "z" * 5000}
    )
    assert len(json.dumps(data)) <= RESPONSE_DATA_MAX_BYTES
    assert data["status_code"] == 200
    assert data["id"] == "m-1"
    assert data["body"].startswith("xxx")
    assert data["body"].endswith("…")
    assert len(data["body"]) <= 500


def test_response_data_too_big_even_when_cut_keeps_the_small_facts():
    data = bounded_response({"status_code": 503, **{f"k{i}": ["v" * 90] * 20 for i in range(100)}})
    assert data == {"status_code": 503, "truncated": True}


def test_empty_response_data():
    assert bounded_response(None) == {}
    assert bounded_response({}) == {}


def test_response_data_is_made_storable():
    """jsonb refuses NUL and lone surrogates: a receiver's answer holding them must not fail the step's record."""
    data = bounded_response({"json": {"id": "a\x00b", "k\x00": ["\ud800x"]}, "body": "raw\x00"})
    assert data == {"json": {"id": "a\ufffdb", "k\ufffd": ["\ufffdx"]}, "body": "raw\ufffd"}
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # no lone surrogate left


def test_a_limit_hit_inside_an_if_condition_still_stops_the_render():
    """Django's `{% if %}` swallows exceptions raised while it evaluates `or`/`==`: the stop must stick."""
    build = "".join("{% with j=j|add:j %}" for _ in range(10))  # 512 x 1,000 = 512,000 characters
    condition = " or ".join(["j|add:j == 1"] * 20)  # each 1,024,000: over the output limit
    source = (
        '{% with j="' + "x" * 1000 + '" %}' + build + "{% for k in trigger.keys %}{% if " + condition + " %}!"
        "{% endif %}{% endfor %}" + "{% endwith %}" * 11
    )
    started = time.monotonic()
    with pytest.raises(TemplateError, match="longer than"):
        renderer.render_text(source, {"trigger": {"keys": "k" * 2000}})
    assert time.monotonic() - started < 10  # before the fix: every pass recomputed 20 joins of a megabyte


@pytest.mark.parametrize(
    ("render", "shown_as"),
    [
        (renderer.render_text, "&lt;img src=x onerror=alert(7)&gt;"),
        (renderer.render_html, "&amp;lt;img src=x onerror=alert(7)&amp;gt;"),  # escaped by the engine, then the page
    ],
)
def test_a_render_is_plain_text_that_a_page_escapes(render, shown_as):
    """Django's templates return SafeString, which any page then shows as markup: a contact's name rendered
    into a text part would run as script wherever the text is shown (the builder's preview did)."""
    from django.template import Context, Template

    hostile = "<img src=x onerror=alert(7)>"
    context = template_context(
        contact={"first_name": hostile}, trigger={}, steps=[], event="", workflow={}, run={"id": "r", "step": 0}
    )
    output = render("Hi {{ contact.first_name }}", context)
    assert type(output) is str
    shown = Template("<p>{{ text }}</p>").render(Context({"text": output}))
    assert "<img" not in shown
    assert shown_as in shown
