"""A marketer builds a branch and a split through their forms in the browser: condition rows, the step each
path leads to, the split's shares totalled as they type, an error next to its field, and what is stored is
the CONTRACT's graph. Headless Chromium against a live server."""

from __future__ import annotations

import pytest
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import Page
from tests.browser.test_marketer_scenario import log_in
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from workflows.admin_roles import grant_role
from workflows.infrastructure.models import Workflow

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def add_step(page: Page, action_type: str, name: str):
    page.find(f"[data-add-step='{action_type}']").click()
    card = page.find_all("[data-steps] > [data-step]")[-1]
    card.find_element("css selector", ".relay-step-head input[name$='-name']").send_keys(name)
    return card


def within(card, css: str):
    return card.find_element("css selector", css)


def choose_step(select_element, key: str) -> None:
    Select(select_element).select_by_value(key)


def test_a_marketer_builds_a_branch_and_a_split_through_the_forms(page: Page):
    account = AccountFactory(name="Acme", slug="acme")
    user = UserFactory(username="mia")
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    log_in(page, "mia")
    page.visit("/admin/workflows/workflow/add/")
    page.wait_css("[data-palette]")
    page.find("#id_name").send_keys("Plan router")
    page.find("#id_trigger_type_1").click()  # by hand

    seen = add_step(page, "add_tag", "Mark as seen")
    within(seen, "input[name$='add_tag-tag']").send_keys("seen")
    branch = add_step(page, "branch", "Which plan?")
    split = add_step(page, "split", "Try two subject lines")
    variant = add_step(page, "add_tag", "Tag variant A")
    within(variant, "input[name$='add_tag-tag']").send_keys("variant_a")
    finish = add_step(page, "end", "Finish")
    keys = [within(c, "[data-step-key]").get_attribute("value") for c in (seen, branch, split, variant, finish)]
    assert keys == ["step_1", "step_2", "step_3", "step_4", "step_5"]  # generated, shown and editable
    assert not within(branch, "[data-next-row]").is_displayed()  # a branch's paths say where it goes

    # The branch: "VIP" when the contact's tags contain vip -> the split; otherwise -> finish.
    block = within(branch, "[data-block]")
    within(block, "input[name$='-name']").send_keys("VIP")
    row = within(block, "[data-conditions] [data-row]")
    Select(within(row, "[data-condition-field]")).select_by_value("tags")
    Select(within(row, "[data-condition-op]")).select_by_value("contains")
    within(row, "[data-condition-value]").send_keys("vip")
    target = within(block, "select[data-step-choice]")
    labels = [o.text for o in Select(target).options]
    assert "3. Try two subject lines (step_3)" in labels  # branches show which step each path leads to
    assert "2. Which plan? (step_2)" not in labels  # not itself
    choose_step(target, "step_3")
    # A second branch, "Trial", on trigger data, with an operator that takes no value.
    within(branch, "[data-add-block]").click()
    second = within(branch, "[data-block][data-block-index='1']")
    within(second, "input[name$='-name']").send_keys("Has a plan")
    row = within(second, "[data-conditions] [data-row]")
    Select(within(row, "[data-condition-field]")).select_by_value("trigger.")
    path = within(row, "[data-condition-path]")
    assert path.is_displayed()
    path.send_keys("plan")
    Select(within(row, "[data-condition-op]")).select_by_value("is_set")
    assert not within(row, "[data-condition-value]").is_displayed()  # "is set" takes no value
    choose_step(within(second, "select[data-step-choice]"), "step_4")
    choose_step(within(branch, "select[name$='branch-default']"), "step_5")

    # The split: the shares are totalled as they are typed.
    weights = split.find_elements("css selector", "[data-split-weight]")
    weights[1].clear()
    weights[1].send_keys("40")
    total = within(split, "[data-split-total]")
    assert total.text == "Total: 90%: the shares must add up to 100%."
    targets = split.find_elements("css selector", "[data-split] select[data-step-choice]")
    choose_step(targets[0], "step_4")
    choose_step(targets[1], "step_5")
    choose_step(within(variant, "[data-next-row] select"), "step_5")
    # Renaming a key carries the choices that named it.
    key = within(split, "[data-step-key]")
    key.clear()
    key.send_keys("ab_test")
    chosen = Select(within(branch, "[data-block] select[data-step-choice]")).first_selected_option.text
    assert chosen == "3. Try two subject lines (ab_test)"
    # A goal: contacts tagged customer have bought; the run ends (the blank choice), wherever it is.
    goal = page.find("[data-blocks='goals'] [data-block]")
    within(goal, "input[name$='-name']").send_keys("Bought")
    row = within(goal, "[data-conditions] [data-row]")
    Select(within(row, "[data-condition-field]")).select_by_value("tags")
    Select(within(row, "[data-condition-op]")).select_by_value("contains")
    within(row, "[data-condition-value]").send_keys("customer")
    assert Select(within(goal, "select[data-step-choice]")).first_selected_option.text == "End the run: goal met"
    page.shot("branch-and-split")

    # A wait for a click, looked at and then removed: its match fields follow the event chosen.
    wait = add_step(page, "wait_for_event", "Wait for a click")
    Select(within(wait, "select[name$='wait_for_event-event']")).select_by_value("email.clicked")
    assert within(wait, "input[name$='wait_for_event-link']").is_displayed()
    assert not within(wait, "input[name$='wait_for_event-tag']").is_displayed()
    assert within(wait, "[data-next-label]").text == "When it happens, go to"
    within(wait, "input[name$='wait_for_event-timeout_amount']").send_keys("3")
    wait.location_once_scrolled_into_view  # noqa: B018 - scrolls the card into the screenshot
    page.shot("wait-for-event")
    within(wait, "[data-remove-step]").click()

    # Saved as is, the split's shares are refused next to its field, in plain words; nothing is stored.
    page.find("input[name=_continue]").click()
    page.wait_css(".relay-field-error")
    split = page.find_all("[data-steps] > [data-step]")[2]
    error = within(split, ".relay-field-invalid .relay-field-error")
    assert error.text == "The shares add up to 90%: they must add up to 100%."
    assert not Workflow.objects.exists()
    # The page came back with every choice kept, and the step removed before the save still removed.
    assert not page.find_all("[data-steps] > [data-step]")[5].is_displayed()
    branch = page.find_all("[data-steps] > [data-step]")[1]
    assert Select(within(branch, "select[name$='branch-default']")).first_selected_option.text == "5. Finish (step_5)"
    page.shot("split-error")
    weight = split.find_elements("css selector", "[data-split-weight]")[1]
    weight.clear()
    weight.send_keys("50")
    assert within(split, "[data-split-total]").text == "Total: 100% ✓"
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    workflow = Workflow.objects.get()
    stored = [(s.key, s.action_type, s.config, s.next_key) for s in workflow.steps.order_by("position")]
    assert stored == [
        ("step_1", "add_tag", {"tag": "seen"}, ""),
        (
            "step_2",
            "branch",
            {
                "branches": [
                    {
                        "name": "VIP",
                        "conditions": [{"field": "tags", "op": "contains", "value": "vip"}],
                        "next": "ab_test",
                    },
                    {
                        "name": "Has a plan",
                        "conditions": [{"field": "trigger.plan", "op": "is_set", "value": None}],
                        "next": "step_4",
                    },
                ],
                "default": "step_5",
            },
            "",
        ),
        (
            "ab_test",
            "split",
            {"paths": [{"name": "A", "weight": 50, "next": "step_4"}, {"name": "B", "weight": 50, "next": "step_5"}]},
            "",
        ),
        ("step_4", "add_tag", {"tag": "variant_a"}, "step_5"),
        ("step_5", "end", {}, ""),
    ]
    assert workflow.goals == [
        {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}], "then": "$end"}
    ]
    page.shot("saved")
