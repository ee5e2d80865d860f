"""A marketer builds, checks, previews and publishes a workflow in the admin, tags a contact, and watches
the run complete on its timeline; an operator sees the dashboard's numbers move. Headless Chromium, a
live server and a real `runworker` on PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from contacts.application.services import contact_create
from tests.browser.conftest import Page
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from workflows.admin_roles import grant_role
from workflows.infrastructure.models import Workflow, WorkflowExecution

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "correct-horse-battery"


def log_in(page: Page, username: str) -> None:
    page.driver.delete_all_cookies()
    page.visit("/admin/login/")
    page.find("#id_username").send_keys(username)
    page.find("#id_password").send_keys(PASSWORD)
    page.find("input[type=submit]").click()
    page.wait_css("#user-tools")


def dashboard_numbers(page: Page) -> dict[str, str]:
    page.visit("/admin/dashboard/")
    page.wait_css("[data-testid=dashboard]")
    return {key: page.find(f"[data-testid={key}]").text for key in ("runs-24h", "completed-24h", "failure-rate")}


def card(page: Page, number: int):
    return page.find_all("[data-steps] > [data-step]")[number - 1]


def add_step(page: Page, label: str):
    page.find(f"[data-add-step='{label}']").click()
    return page.find_all("[data-steps] > [data-step]")[-1]


def test_a_marketer_builds_publishes_and_watches_a_run(page: Page, start_worker, live_server):
    account: Any = AccountFactory(name="Acme", slug="acme", time_zone="Europe/Paris")
    marketer = UserFactory(username="mia")
    MembershipFactory(account=account, user=marketer, role="marketer")
    grant_role(marketer, "marketer")
    operator = UserFactory(username="otto")
    MembershipFactory(account=account, user=operator, role="viewer")
    grant_role(operator, "operator")
    ada = contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="+15550100001")
    start_worker("--concurrency", "2")

    page.visit("/admin/login/")
    assert "Relay" in page.driver.title
    page.shot("login")
    log_in(page, "otto")
    before = dashboard_numbers(page)
    assert before["runs-24h"] == "0"

    # --- build the workflow through the forms, no JSON typed --------------------------------------
    log_in(page, "mia")
    page.visit("/admin/workflows/workflow/add/")
    page.wait_css("[data-palette]")
    assert "Django administration" not in page.text()
    page.shot("new-workflow")
    page.find("#id_name").send_keys("VIP welcome")
    Select(page.find("#id_trigger_event")).select_by_value("tag.added")
    page.find("#id_trigger_tag").send_keys("vip")

    email = add_step(page, "send_email")
    email.find_element("css selector", "input[name$='-name']").send_keys("Welcome email")
    subject = email.find_element("css selector", "input[name$='send_email-subject']")
    subject.send_keys("Welcome {{ contact.frist_name }}")  # a typo the save must catch
    text = email.find_element("css selector", "textarea[name$='send_email-text']")
    text.send_keys("Hi ")
    text.find_element("xpath", "following-sibling::button[contains(@class, 'relay-personalize')]").click()
    page.wait_css(".relay-menu")
    next(item for item in page.find_all(".relay-menu-item") if item.text.startswith("First name")).click()
    text.send_keys(", welcome to Acme.")
    assert text.get_attribute("value") == "Hi {{ contact.first_name }}, welcome to Acme."

    wait = add_step(page, "wait")
    wait.find_element("css selector", "input[name$='wait-amount']").send_keys("2")
    Select(wait.find_element("css selector", "select[name$='wait-unit']")).select_by_value("seconds")

    # The third step decides: "if the contact has the tag vip: update it, else: end the run", built through
    # its condition rows (no JSON typed); the fourth step is what the branch leads to.
    branch = add_step(page, "branch")
    branch.find_element("css selector", ".relay-step-head input[name$='-name']").send_keys("VIP?")
    update = add_step(page, "update_contact")
    update.find_element("css selector", ".relay-step-head input[name$='-name']").send_keys("Mark as VIP")
    update.find_element("css selector", "input[name$='custom_field_values-key']").send_keys("plan")
    update.find_element("css selector", "input[name$='custom_field_values-value']").send_keys("vip")
    block = branch.find_element("css selector", "[data-block]")
    block.find_element("css selector", "input[name$='-name']").send_keys("VIP")
    row = block.find_element("css selector", "[data-conditions] [data-row]")
    Select(row.find_element("css selector", "[data-condition-field]")).select_by_value("tags")
    Select(row.find_element("css selector", "[data-condition-op]")).select_by_value("contains")
    row.find_element("css selector", "[data-condition-value]").send_keys("vip")
    Select(block.find_element("css selector", "select[data-step-choice]")).select_by_visible_text(
        "4. Mark as VIP (step_4)"
    )
    Select(branch.find_element("css selector", "select[name$='branch-default']")).select_by_value("$end")
    page.shot("builder-filled")

    # --- the typo is refused next to its field; fix it ------------------------------------------
    page.find("input[name=_continue]").click()
    page.wait_css(".relay-field-error")
    error = card(page, 1).find_element("css selector", ".relay-field-invalid .relay-field-error")
    assert "Did you mean {{ contact.first_name }}?" in error.text
    assert not Workflow.objects.exists()
    page.shot("validation-error")
    subject = card(page, 1).find_element("css selector", "input[name$='send_email-subject']")
    subject.clear()
    subject.send_keys("Welcome, {{ contact.first_name }}")

    # --- preview the email for Ada ------------------------------------------------------------
    first = card(page, 1)
    first.find_element("css selector", "[data-preview-contact]").send_keys("ada@example.com")
    first.find_element("css selector", "[data-preview-button]").click()
    page.wait_for(lambda: card(page, 1).find_element("css selector", "[data-preview-subject]").text, what="preview")
    assert card(page, 1).find_element("css selector", "[data-preview-subject]").text == "Welcome, Ada"
    assert "Hi Ada, welcome to Acme." in card(page, 1).find_element("css selector", "[data-preview-text]").text
    page.shot("email-preview")

    # --- publish ------------------------------------------------------------------------------
    page.find("input[name=_publish]").click()
    page.wait_css(".messagelist")
    assert "Published “VIP welcome” as version 1" in page.text()
    assert "runs use v1" in page.text()
    workflow = Workflow.objects.get()
    assert [(s.key, s.action_type) for s in workflow.steps.order_by("position")] == [
        ("step_1", "send_email"),
        ("step_2", "wait"),
        ("step_3", "branch"),
        ("step_4", "update_contact"),
    ]
    assert workflow.steps.get(key="step_3").config == {
        "branches": [
            {"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "step_4"}
        ],
        "default": "$end",
    }
    page.shot("published")

    # --- tag Ada with the tag widget; the run starts and completes ------------------------------
    page.visit(f"/admin/contacts/contact/{ada.pk}/change/")
    entry = page.wait_css(".relay-chip-entry")
    entry.send_keys("vip", Keys.ENTER)
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    run = page.wait_for(lambda: WorkflowExecution.objects.filter(contact_id=ada.pk).first(), what="the run to start")
    page.visit(f"/admin/contacts/contact/{ada.pk}/change/")
    page.find("[data-testid=contact-runs] td a").click()
    page.wait_css("[data-testid=timeline]")
    page.wait_for(lambda: page.find("[data-testid=run-status]").text == "completed", timeout=45, what="completion")
    states = [li.get_attribute("data-step-state") for li in page.find_all("[data-testid=timeline] > li")]
    assert states == ["done", "done", "done", "done"]
    decision = page.find("[data-testid=timeline] > li:nth-child(3) [data-decision]").text
    assert decision == '↳ Took the branch “VIP” (tags = ["vip"]) → “step_4”'  # which branch, and why
    assert page.find("[data-testid=run-path]").text.endswith("step_1 → step_2 → step_3 → step_4")
    run.refresh_from_db()
    assert run.status == "completed"
    page.shot("run-timeline")
    page.visit(f"/admin/workflows/workflowexecution/?workflow__id__exact={workflow.pk}")
    page.wait_css("#result_list")
    page.shot("runs-list")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/stats/")
    assert "Welcome email" in page.wait_css("[data-testid=workflow-stats]").text
    page.shot("workflow-stats")
    page.visit("/admin/workflows/workflow/")
    page.shot("workflows-list")

    # --- the operator's dashboard moved --------------------------------------------------------
    log_in(page, "otto")
    after = dashboard_numbers(page)
    assert after["runs-24h"] == "1"
    assert after["completed-24h"] == "1"
    page.shot("dashboard")
