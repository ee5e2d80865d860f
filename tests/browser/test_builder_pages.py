"""The builder's other pages in the browser: reorder with ↑/↓ and drag and drop, the SMS counter and the
JSON check as you type, the version diff, contacts' tags and bulk tagging, an import with a refused row."""

from __future__ import annotations

import pytest
from selenium.webdriver.support.ui import Select

from contacts.application.services import contact_create
from tests.browser.conftest import Page
from tests.browser.test_marketer_scenario import log_in
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow
from workflows.admin_roles import grant_role
from workflows.application.workflows import WorkflowService
from workflows.infrastructure.models import WorkflowStep

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DRAG = """
const [source, target] = arguments;
const data = new DataTransfer();
source.querySelector('[data-drag-handle]').dispatchEvent(new MouseEvent('mousedown', {bubbles: true}));
source.dispatchEvent(new DragEvent('dragstart', {bubbles: true, dataTransfer: data}));
const box = target.getBoundingClientRect();
target.parentNode.dispatchEvent(new DragEvent('dragover', {bubbles: true, cancelable: true, dataTransfer: data,
  clientY: box.top + 2}));
target.parentNode.dispatchEvent(new DragEvent('drop', {bubbles: true, cancelable: true, dataTransfer: data}));
source.dispatchEvent(new DragEvent('dragend', {bubbles: true, dataTransfer: data}));
"""


@pytest.fixture
def marketer_account(db):
    account = AccountFactory(name="Acme", slug="acme")
    user = UserFactory(username="mia")
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    return account


def names(page: Page) -> list[str]:
    return [c.find_element("css selector", "input[name$='-name']").get_attribute("value") for c in steps(page)]


def steps(page: Page) -> list:
    return [c for c in page.find_all("[data-steps] > [data-step]") if c.is_displayed()]


def test_reorder_with_buttons_and_drag_and_drop_then_save(page: Page, marketer_account):
    workflow = make_workflow(
        marketer_account,
        [
            {"name": "A", "action_type": "add_tag", "config": {"tag": "a"}},
            {"name": "B", "action_type": "send_sms", "config": {"body": "Hi"}},
            {"name": "C", "action_type": "webhook", "config": {"url": "https://hooks.example.com/x"}},
        ],
        publish=False,
    )
    log_in(page, "mia")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/change/")
    page.wait_css("[data-steps]")
    steps(page)[1].find_element("css selector", "[data-move=up]").click()
    assert names(page) == ["B", "A", "C"]
    assert [c.find_element("css selector", "[data-step-number]").text for c in steps(page)] == ["1", "2", "3"]
    page.driver.execute_script(DRAG, steps(page)[2], steps(page)[0])
    assert names(page) == ["C", "B", "A"]

    sms = steps(page)[1].find_element("css selector", "textarea[name$='send_sms-body']")
    sms.clear()
    sms.send_keys("ł" * 71)  # not in the GSM alphabet: 70 a part
    counter = steps(page)[1].find_element("css selector", ".relay-counter").text
    assert counter.startswith("71 characters · 2 SMS")
    body = steps(page)[0].find_element("css selector", "textarea[name$='webhook-body']")
    body.send_keys('{"a": ')
    assert "Not valid JSON yet" in steps(page)[0].find_element("css selector", ".relay-json-status").text
    body.send_keys("1}")
    assert steps(page)[0].find_element("css selector", ".relay-json-status").text == "✓ Valid JSON"
    page.shot("reordered")
    page.find("input[name=_continue]").click()
    page.wait_css(".messagelist")
    saved = list(WorkflowStep.objects.filter(workflow=workflow).order_by("position").values_list("name", flat=True))
    assert saved == ["C", "B", "A"]
    assert WorkflowStep.objects.get(workflow=workflow, name="C").config["body"] == {"a": 1}


def test_version_history_shows_a_readable_diff(page: Page, marketer_account):
    workflow = make_workflow(
        marketer_account, [{"name": "Hello", "action_type": "send_email", "config": {"subject": "Hi", "text": "x"}}]
    )
    WorkflowService().update(
        workflow_id=workflow.pk,
        steps=[{"name": "Hello", "action_type": "send_email", "config": {"subject": "Welcome!", "text": "x"}}],
    )
    WorkflowService().publish(workflow_id=workflow.pk)
    log_in(page, "mia")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/versions/")
    diff = page.wait_css("[data-testid=diff]")
    assert "Step step_1 (Hello)" in diff.text
    assert "Hi" in diff.text
    assert "Welcome!" in diff.text
    page.shot("version-diff")


def test_contacts_tags_bulk_tagging_and_an_import_with_a_refused_row(
    page: Page, marketer_account, start_worker, tmp_path
):
    for i, tags in enumerate([["vip"], ["trial"], []]):
        contact_create(
            account_id=marketer_account.pk, email=f"c{i}@example.com", first_name=f"C{i}", phone="", tags=tags
        )
    start_worker("--concurrency", "1")
    log_in(page, "mia")
    page.visit("/admin/contacts/contact/?tag=vip")
    page.wait_css("#result_list")
    assert "c0@example.com" in page.text()
    assert "c1@example.com" not in page.text()
    page.visit("/admin/contacts/contact/")
    for box in page.find_all("input.action-select"):
        box.click()
    Select(page.find("select[name=action]")).select_by_value("add_tag")
    page.find("button[name=index]").click()
    page.wait_css("#id_tag").send_keys("newsletter")
    page.shot("bulk-tag")
    page.find("input[type=submit]").click()
    page.wait_css(".messagelist")
    assert "Tag “newsletter” added to 3 contact(s)" in page.text()
    page.shot("contacts-list")

    csv = tmp_path / "webinar.csv"
    csv.write_text("Email,First name,Phone\nada@example.com,Ada,+15550100001\nbad-address,Bob,\n")
    page.visit("/admin/contacts/contact/import/")
    page.wait_css("input[type=file]").send_keys(str(csv))
    page.find("input[type=submit]").click()
    page.wait_css("[data-testid=import]")
    page.shot("import-mapping")
    page.find("input[name=_import]").click()
    page.wait_for(
        lambda: page.find("[data-testid=import-status]").text.startswith("Refused"), timeout=30, what="refusal"
    )
    problems = page.find("[data-testid=import-problems]").text
    assert "bad-address" in problems
    page.shot("import-refused")


def test_a_viewer_reads_the_steps_in_words_with_secrets_hidden(page: Page, marketer_account):
    viewer = UserFactory(username="vic")
    MembershipFactory(account=marketer_account, user=viewer, role="viewer")
    grant_role(viewer, "viewer")
    workflow = make_workflow(
        marketer_account,
        [
            {
                "name": "Welcome",
                "action_type": "send_email",
                "config": {"subject": "Hi {{ contact.first_name }}", "text": "x"},
            },
            {"action_type": "wait", "config": {"duration": "3d"}},
            {
                "name": "Tell the shop",
                "action_type": "webhook",
                "config": {"url": "https://hooks.example.com/T0K3N", "headers": {"Authorization": "Bearer s3cret"}},
            },
        ],
    )
    log_in(page, "vic")
    page.visit(f"/admin/workflows/workflow/{workflow.pk}/change/")
    steps_text = page.wait_css(".relay-steps-readonly").text
    assert "For 3 days" in steps_text.replace("\n", " ")
    assert "T0K3N" not in page.driver.page_source
    assert "s3cret" not in page.driver.page_source
    assert not page.find_all("[data-add-step]")
    page.shot("viewer")
