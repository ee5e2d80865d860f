"""The builder's forms for the steps that decide, as a browser posts them: keys and "then go to", branches as
condition rows, a split's shares, a wait for a click; the graph's errors next to the field they name, every
step's at once, nothing stored; and the change page shows every such step in its form again."""

import pytest
from django.urls import reverse

from tests.factories import MembershipFactory, UserFactory
from tests.integration.admin.test_builder import page_data
from tests.integration.workflows.support import make_workflow
from workflows.admin_roles import grant_role
from workflows.infrastructure.models import Workflow, WorkflowStep

pytestmark = pytest.mark.django_db


@pytest.fixture
def marketer(client, account):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    client.force_login(user)
    return client


STEPS = [
    ("send_email", {"subject": "Hi", "text": "Hello {{ contact.first_name }}"}),
    (
        "wait_for_event",
        {"event": "email.clicked", "email_step": "welcome", "timeout_amount": "3", "timeout_unit": "days"},
    ),
    (
        "branch",
        {
            "branches-0-name": "Clicked",
            "branches-0-when-field": ["steps.welcome.clicked", ""],
            "branches-0-when-path": ["", ""],
            "branches-0-when-op": ["equals", "equals"],
            "branches-0-when-value": ["true", ""],
            "branches-0-next": "ab",
            "default": "reminder",
        },
    ),
    ("split", {"paths-name": ["A", "B"], "paths-weight": ["50", "50"], "paths-next": ["tag_engaged", "done"]}),
    ("add_tag", {"tag": "engaged"}),
    ("send_email", {"subject": "Still there?", "text": "A reminder"}),
    ("end", {}),
]
KEYS = ["welcome", "wait_click", "check", "ab", "tag_engaged", "reminder", "done"]
NEXT = {"wait_click": "check", "tag_engaged": "done", "reminder": "done"}


def graph_page(account, steps=STEPS, keys=KEYS, nexts=NEXT, existing=(), **extra):
    data = page_data(account, steps, existing=existing, **extra)
    for index, key in enumerate(keys):
        data[f"steps-{index}-key"] = key
        data[f"steps-{index}-next_key"] = nexts.get(key, "")
    data["steps-1-wait_for_event-on_timeout"] = "reminder"
    return data


def test_a_graph_is_built_from_its_fields(marketer, account):
    response = marketer.post(reverse("admin:workflows_workflow_add"), graph_page(account))
    assert response.status_code == 302, response.content.decode()[:3000]
    stored = [(s.key, s.action_type, s.config, s.next_key) for s in Workflow.objects.get().steps.order_by("position")]
    assert stored == [
        ("welcome", "send_email", {"subject": "Hi", "text": "Hello {{ contact.first_name }}"}, ""),
        (
            "wait_click",
            "wait_for_event",
            {"event": "email.clicked", "match": {"step": "welcome"}, "timeout": "3d", "on_timeout": "reminder"},
            "check",
        ),
        (
            "check",
            "branch",
            {
                "branches": [
                    {
                        "name": "Clicked",
                        "conditions": [{"field": "steps.welcome.clicked", "op": "equals", "value": True}],
                        "next": "ab",
                    }
                ],
                "default": "reminder",
            },
            "",
        ),
        (
            "ab",
            "split",
            {
                "paths": [
                    {"name": "A", "weight": 50, "next": "tag_engaged"},
                    {"name": "B", "weight": 50, "next": "done"},
                ]
            },
            "",
        ),
        ("tag_engaged", "add_tag", {"tag": "engaged"}, "done"),
        ("reminder", "send_email", {"subject": "Still there?", "text": "A reminder"}, "done"),
        ("done", "end", {}, ""),
    ]


def test_the_change_page_shows_each_deciding_step_in_its_form_and_round_trips(marketer, account):
    marketer.post(reverse("admin:workflows_workflow_add"), graph_page(account))
    workflow = Workflow.objects.get()
    before = [(s.key, s.config, s.next_key) for s in workflow.steps.order_by("position")]
    page = marketer.get(reverse("admin:workflows_workflow_change", args=[workflow.pk]))
    formset = page.context["inline_admin_formsets"][0].formset
    assert not any(form.in_json_mode for form in formset.forms)  # every config fits its form
    html = page.content.decode()
    assert '<option value="ab" selected>4. Split (A/B test) (ab)</option>' in html  # the branch's target, by name
    existing = list(workflow.steps.order_by("position"))
    response = marketer.post(
        reverse("admin:workflows_workflow_change", args=[workflow.pk]), graph_page(account, existing=existing)
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert [(s.key, s.config, s.next_key) for s in workflow.steps.order_by("position")] == before


def test_graph_errors_land_next_to_their_fields_for_every_step_at_once(marketer, account):
    steps = list(STEPS)
    steps[2] = ("branch", {**STEPS[2][1], "branches-0-next": "nowhere"})  # names a step that does not exist
    steps[3] = ("split", {**STEPS[3][1], "paths-weight": ["50", "49"]})  # sums to 99
    data = graph_page(account, steps=steps, nexts={**NEXT, "tag_engaged": "gone"})
    data["steps-0-key"] = "Welcome Email"
    response = marketer.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 200
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert forms[0].errors["key"] == ["A key is 1 to 64 lowercase letters, digits and _, e.g. welcome_email."]
    branch = forms[2].config_forms["branch"].errors["branches"]
    assert branch == [
        "Branch 1 (where it leads): names no step of this workflow: 'nowhere'",
        "Branch 1, condition 1 (field): names no step of this workflow: 'welcome'",  # its key is being renamed
    ]
    assert forms[3].config_forms["split"].errors["paths"] == ["The shares add up to 99%: they must add up to 100%."]
    assert forms[4].errors["next_key"] == ["Names no step of this workflow: 'gone'"]
    assert not Workflow.objects.exists()
    assert not WorkflowStep.objects.exists()


def test_an_unreachable_step_is_said_plainly_on_its_card(marketer, account):
    steps = [("add_tag", {"tag": "a"}), ("add_tag", {"tag": "b"})]
    data = page_data(account, steps)
    data.update({"steps-0-key": "a", "steps-0-next_key": "$end", "steps-1-key": "b"})
    response = marketer.post(reverse("admin:workflows_workflow_add"), data)
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert forms[1].non_field_errors() == [
        "No step leads here: contacts never reach this step. Point another step's “then go to”, a branch or a "
        "path at it, or remove it."
    ]
    assert not Workflow.objects.exists()


def test_swapping_two_keyed_steps_keeps_their_keys(marketer, account):
    workflow = make_workflow(
        account,
        [
            {"key": "one", "action_type": "add_tag", "config": {"tag": "one"}},
            {"key": "two", "action_type": "add_tag", "config": {"tag": "two"}},
        ],
        publish=False,
    )
    existing = list(workflow.steps.order_by("position"))
    data = page_data(account, [("add_tag", {"tag": "one"}), ("add_tag", {"tag": "two"})], existing=existing)
    data.update({"steps-0-key": "one", "steps-1-key": "two", "steps-0-position": 1, "steps-1-position": 0})
    response = marketer.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert [(s.key, s.config["tag"]) for s in workflow.steps.order_by("position")] == [("two", "two"), ("one", "one")]


def test_the_trigger_filter_takes_every_operator_of_the_condition_language(marketer, account):
    filter_rows = {
        "trigger_filter-field": ["first_name", "custom_fields.", ""],
        "trigger_filter-path": ["", "signed_up", ""],
        "trigger_filter-op": ["in", "after", "equals"],
        "trigger_filter-value": ["Ada, Bob", "-30 days", ""],
    }
    response = marketer.post(reverse("admin:workflows_workflow_add"), graph_page(account, **filter_rows))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Workflow.objects.get().trigger_filter == [
        {"field": "first_name", "op": "in", "value": ["Ada", "Bob"]},
        {"field": "custom_fields.signed_up", "op": "after", "value": "-30 days"},
    ]


def _goal_fields(name, field, op, value, then=""):
    return {
        "goals-0-name": name,
        "goals-0-when-field": [field, ""],
        "goals-0-when-path": ["", ""],
        "goals-0-when-op": [op, "equals"],
        "goals-0-when-value": [value, ""],
        "goals-0-next": then,
    }


def test_goals_are_built_from_their_rows_and_may_jump_to_a_step_of_the_same_save(marketer, account):
    data = graph_page(account, **_goal_fields("Bought", "tags", "contains", "customer", then="reminder"))
    response = marketer.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    workflow = Workflow.objects.get()
    assert workflow.goals == [
        {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}], "then": "reminder"}
    ]
    page = marketer.get(reverse("admin:workflows_workflow_change", args=[workflow.pk])).content.decode()
    assert 'name="goals-0-name" value="Bought"' in page
    data = graph_page(account, **_goal_fields("Bought", "tags", "contains", "customer"))  # blank: end the run
    data["name"] = "Other"
    assert marketer.post(reverse("admin:workflows_workflow_add"), data).status_code == 302
    assert Workflow.objects.get(name="Other").goals[0]["then"] == "$end"


def test_a_goal_on_an_unknown_field_is_refused_next_to_the_goals(marketer, account):
    data = graph_page(account, **_goal_fields("Bought", "frist_name", "equals", "Ada"))
    response = marketer.post(reverse("admin:workflows_workflow_add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["goals"]
    assert len(errors) == 1
    assert errors[0].startswith("Goal 1, condition 1 (field): ")
    assert not Workflow.objects.exists()
