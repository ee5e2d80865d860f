"""What a marketer sees of the contact's clock: a wait until a time of day on the contact's time zone in
the builder, and the time zone a contact's dates are read in on its page."""

from __future__ import annotations

import pytest
from selenium.webdriver.support.ui import Select

from contacts.application.services import contact_create
from tests.browser.conftest import Page
from tests.browser.test_builder_pages import marketer_account, steps  # noqa: F401 - a fixture, by name
from tests.browser.test_marketer_scenario import log_in
from tests.integration.workflows.support import make_workflow
from workflows.infrastructure.models import WorkflowStep

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_wait_until_nine_on_the_contacts_clock_in_the_builder(page: Page, marketer_account):  # noqa: F811
    marketer_account.time_zone = "Europe/Paris"
    marketer_account.save()
    workflow = make_workflow(
        marketer_account,
        [
            {"name": "Morning", "action_type": "wait", "config": {"time_of_day": "09:00", "time_zone": "contact"}},
            {"name": "Hello", "action_type": "send_sms", "config": {"body": "Good morning"}},
        ],
        publish=False,
    )
    log_in(page, "mia")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/change/")
    page.wait_css("[data-steps]")
    wait = steps(page)[0]
    chosen = wait.find_element("css selector", "input[name$='wait-mode']:checked")
    assert chosen.get_attribute("value") == "time_of_day"
    at = wait.find_element("css selector", "input[name$='wait-at_time']")
    assert at.is_displayed()
    assert at.get_attribute("value") == "09:00"
    clock = Select(wait.find_element("css selector", "select[name$='wait-clock']"))
    assert clock.first_selected_option.text.startswith("the contact's time zone")
    assert next(o.text for o in clock.options) == "the account's time zone (Europe/Paris)"
    assert not wait.find_element("css selector", "input[name$='wait-amount']").is_displayed()
    page.shot("wait-until-nine-on-the-contacts-clock")
    # A date and time on the account's clock: written with its offset, as before.
    wait.find_element("css selector", "input[name$='wait-mode'][value='until']").click()
    assert not at.is_displayed()
    page.driver.execute_script(
        "arguments[0].value = '2027-01-15'; arguments[1].value = '09:30';",
        wait.find_element("css selector", "input[name$='wait-until_date']"),
        wait.find_element("css selector", "input[name$='wait-until_time']"),
    )
    clock.select_by_value("account")
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    assert WorkflowStep.objects.get(workflow=workflow, position=0).config == {"until": "2027-01-15T09:30:00+01:00"}


def test_a_contacts_page_shows_the_time_zone_in_use_and_where_it_came_from(page: Page, marketer_account):  # noqa: F811
    marketer_account.time_zone = "America/Chicago"
    marketer_account.save()
    contact = contact_create(account_id=marketer_account.pk, email="ada@example.com", phone="+33 6 12 34 56 78")
    log_in(page, "mia")
    page.visit(f"/admin/contacts/contact/{contact.pk}/change/")
    page.wait_css("#contact_form")
    assert "Europe/Paris (from the phone number)" in page.text()
    Select(page.find("#id_time_zone")).select_by_value("Asia/Tokyo")
    page.shot("contact-time-zone")
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    assert "Asia/Tokyo (the contact's own)" in page.text()
