"""A contact named with markup, previewed in the builder and shown on the contact pages, in headless Chromium:
no script runs (an `onerror` would set a flag on the page, an `alert` would be recorded) and the name reads as
the characters typed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from contacts.application.services import contact_create
from tests.browser.conftest import Page
from tests.browser.test_marketer_scenario import log_in
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from tests.support import hostile
from workflows.admin_roles import grant_role

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

FIRST_NAME = "<img src=x onerror=\"window.__relayXss='first_name'\">"
LAST_NAME = "<img src=x onerror=alert(7)>"
WATCH = """
window.__relayXss = null; window.__relayAlerts = [];
window.alert = function (text) { window.__relayAlerts.push(String(text)); };
"""


def no_script_ran(page: Page, where: str) -> None:
    time.sleep(0.5)  # a broken image's error event comes after its request fails
    # An alert the page did not expect (none recorded by WATCH) stops this call: selenium raises on the dialog.
    ran = page.driver.execute_script("return [window.__relayXss || null, window.__relayAlerts || []]")
    assert ran == [None, []], f"{where}: a contact's name ran as script: {ran}"


def watch(page: Page) -> None:
    page.driver.execute_script(WATCH)


def test_a_hostile_contact_previews_and_shows_as_text(page: Page):
    account: Any = AccountFactory(name="Acme", slug="acme")
    user = UserFactory(username="mia")
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    eve = contact_create(  # the newest contact: the one a preview with no contact typed is rendered for
        account_id=account.pk,
        email="eve@example.com",
        first_name=FIRST_NAME,
        last_name=LAST_NAME,
        phone="+15550100002",
        custom_fields={hostile.CUSTOM_KEY: hostile.CUSTOM_VALUE},
        tags=[hostile.TAG],
    )
    workflow = make_workflow(
        account,
        [
            {
                "name": "Welcome",
                "action_type": "send_email",
                "config": {
                    "subject": "Hi {{ contact.first_name }}",
                    "text": "Hi {{ contact.first_name }} {{ contact.last_name }}",
                    "html": "<p>Hi {{ contact.first_name }}</p>"
                    "<p>{% autoescape off %}{{ contact.last_name }}{{ contact.first_name }}{% endautoescape %}</p>",
                },
            },
            {"name": "Text", "action_type": "send_sms", "config": {"body": "Hi {{ contact.first_name }}"}},
        ],
        publish=False,
    )
    log_in(page, "mia")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/change/")
    page.wait_css("[data-steps]")
    watch(page)
    cards = page.find_all("[data-steps] > [data-step]")

    email = cards[0].find_element("css selector", "[data-config-for=send_email]")
    email.find_element("css selector", "[data-preview-button]").click()
    text = page.wait_for(lambda: email.find_element("css selector", "[data-preview-text]"), what="the preview")
    no_script_ran(page, "the email preview")
    assert text.text == f"Hi {FIRST_NAME} {LAST_NAME}"
    assert email.find_element("css selector", "[data-preview-subject]").text == f"Hi {FIRST_NAME}"
    assert "As eve@example.com would see it" in email.find_element("css selector", "[data-preview-result]").text
    frame = email.find_element("css selector", "iframe.relay-preview-frame")
    assert frame.get_attribute("sandbox") == ""
    assert email.find_elements("css selector", "[data-preview-result] img") == []  # nothing built from the name
    page.driver.switch_to.frame(frame)
    assert page.find("body").text.startswith(f"Hi {FIRST_NAME}")  # the HTML part: escaped, then sanitised
    assert all(img.get_attribute("onerror") is None for img in page.find_all("img"))
    page.driver.switch_to.default_content()

    sms = cards[1].find_element("css selector", "[data-config-for=send_sms]")
    sms.find_element("css selector", "[data-preview-button]").click()
    bubble = page.wait_for(lambda: sms.find_element("css selector", "[data-preview-sms]"), what="the SMS")
    assert bubble.text == f"Hi {FIRST_NAME}"
    no_script_ran(page, "the SMS preview")
    cards[0].location_once_scrolled_into_view  # noqa: B018 - scrolls the email's preview into the screenshot
    page.shot("hostile-preview")

    for path in (
        "/admin/contacts/contact/",
        f"/admin/contacts/contact/{eve.pk}/change/",
        f"/admin/workflows/workflow/{workflow.pk}/change/",
    ):
        page.visit(path)
        page.wait_css("#content")
        no_script_ran(page, path)
    page.visit(f"/admin/contacts/contact/{eve.pk}/change/")
    page.wait_css("#id_first_name")
    assert page.find("#id_first_name").get_attribute("value") == FIRST_NAME
    page.shot("hostile-contact-page")
