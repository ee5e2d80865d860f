"""A deferral as a marketer sees it, in headless Chromium: she sets the account's SMS window on its settings
page (custom days and hours, closed right now on the contact's clock), a run's SMS step is then held back, and
the run's timeline and the contact's page both say why in plain words, with the opening on the contact's
clock (Europe/Paris). Screenshots: browser-artifacts/<test>/."""

from __future__ import annotations

import pytest
from django.utils import timezone
from selenium.webdriver.support.ui import Select

from contacts.application.services import contact_create
from integrations.infrastructure.models import SendingSettings
from tests.browser.conftest import Page
from tests.browser.test_builder_pages import marketer_account  # noqa: F401 - a fixture, by name
from tests.browser.test_marketer_scenario import log_in
from tests.integration.workflows.support import make_workflow, run_due_jobs
from tests.integration.workflows.test_deferred_steps import closed_window
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def set_sms_window_on_the_settings_page(page: Page, account, window: dict) -> None:
    """What the marketer does on Integrations > Sending settings > Add: a custom SMS window, saved."""
    page.visit("/admin/integrations/sendingsettings/add/")
    page.wait_css("#sendingsettings_form")
    Select(page.find("#id_account")).select_by_value(str(account.pk))
    Select(page.find("#id_sms_window")).select_by_value("custom")
    for box in page.find_all("input[name=sms_days]"):
        box.click()  # every day
    page.find("#id_sms_hours").send_keys(window["hours"][0])
    page.find("#id_sms_spread").send_keys("0")
    page.shot("settings-page-filled")
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")


def test_a_deferred_sms_shows_in_the_run_timeline_and_on_the_contacts_page(page: Page, marketer_account):  # noqa: F811
    window, opens = closed_window(timezone.now())
    log_in(page, "mia")

    set_sms_window_on_the_settings_page(page, marketer_account, window)
    stored = SendingSettings.objects.get(account=marketer_account)
    assert stored.send_windows == {"sms": {**window, "days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}}
    assert f"SMS: every day {window['hours'][0]}" in page.text()  # what is in force, in words
    page.shot("settings-page-saved")

    contact = contact_create(account_id=marketer_account.pk, email="ada@example.com", phone="+33 6 12 34 56 78")
    assert contact.time_zone == "" or contact.time_zone == "Europe/Paris"  # a French number: Paris's clock
    workflow = make_workflow(
        marketer_account,
        [
            {"name": "Hello", "action_type": "send_sms", "config": {"body": "Bonjour {{ contact.first_name }}"}},
            {"name": "Then", "action_type": "add_tag", "config": {"tag": "greeted"}},
        ],
        name="Welcome",
    )
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    (row,) = ExecutionLog.objects.filter(execution=run)
    reason = row.response_data["reason"]
    assert row.outcome == "deferred"
    assert reason == (f"waiting for the send window (opens {opens:%a} {opens:%d %b %H:%M} Europe/Paris)")

    page.visit(f"/admin/workflows/workflowexecution/{run.pk}/change/")
    head = page.wait_css("[data-testid=run-deferred]")
    assert head.text == f"DEFERRED\n{reason[0].upper()}{reason[1:]}"
    hello = page.find("[data-step-state=deferred]")
    assert reason in hello.text
    assert "held back deferred" in hello.text  # a deferral spends no attempt, so the row does not count one
    assert "attempt 1" not in hello.text
    assert page.find("[data-testid=run-status]").text == "queued"
    page.shot("run-timeline-deferred")

    page.visit(f"/admin/contacts/contact/{contact.pk}/change/")
    waiting = page.wait_css("[data-testid=deferred-send]")
    assert waiting.text.startswith(f"SMS “Hello” {reason[0].upper()}{reason[1:]}")
    assert waiting.text.endswith("Welcome")
    page.find("[data-testid=contact-deferred]").location_once_scrolled_into_view  # noqa: B018 - scrolls
    page.shot("contact-page-sends-waiting")


def test_a_workflow_keeps_its_sms_to_floridas_window_in_the_builder(page: Page, marketer_account):  # noqa: F811
    workflow = make_workflow(
        marketer_account, [{"name": "Hello", "action_type": "send_sms", "config": {"body": "Hi"}}], publish=False
    )
    log_in(page, "mia")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/change/")
    page.wait_css("[data-steps]")
    section = next(s for s in page.find_all("fieldset summary") if "When its messages may go" in s.text)
    section.click()
    sms = Select(page.find("#id_sr_sms_window"))
    assert sms.first_selected_option.text == "As above, else as the account says"
    assert not page.find("#id_sr_sms_hours").is_displayed()  # a custom window's fields only once chosen
    sms.select_by_value("custom")
    assert page.find("#id_sr_sms_hours").is_displayed()
    sms.select_by_value("us_fl")
    assert not page.find("#id_sr_sms_hours").is_displayed()
    assert page.find("#id_sr_sms_holidays").is_displayed()  # a preset may take more holidays
    page.find("input[name=sr_caps][value=none]").click()
    page.driver.execute_script("arguments[0].scrollIntoView()", section)
    page.shot("workflow-sending-overrides")
    # The step's own: France's window, and one SMS a week at most, on its card.
    card = page.find("[data-steps] > [data-step]")
    step_window = Select(card.find_element("css selector", "select[name$='send_sms-sending_all_window']"))
    step_window.select_by_value("fr")
    card.find_element("css selector", "input[name$='send_sms-sending_caps'][value=these]").click()
    card.find_element("css selector", "input[name$='send_sms-sending_cap0_max']").send_keys("1")
    card.find_element("css selector", "input[name$='send_sms-sending_cap0_every']").send_keys("7")
    assert not card.find_element("css selector", "input[name$='send_sms-sending_cap1_max']").get_attribute("value")
    page.driver.execute_script("arguments[0].scrollIntoView()", card)
    page.shot("send-step-overrides")
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    workflow.refresh_from_db()
    assert workflow.sending_rules == {"send_windows": {"sms": "us_fl"}, "frequency_caps": []}
    assert workflow.steps.get().config == {"body": "Hi", "send_window": "fr", "frequency_caps": [{"max": 1, "days": 7}]}
