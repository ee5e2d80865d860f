"""Email engagement over real SMTP and real HTTP: a workflow's email carries a signed pixel and signed links;
following them records `email.opened` / `email.clicked` once per run, step and link, and nothing else works."""

import html as html_lib
import re

import pytest
import requests

from accounts.models import Account
from contacts.models import Event
from tests.integration.integrations.fixtures import smtp_server  # noqa: F401 - a fixture, found by name
from tests.integration.workflows.support import SALE_EMAIL_STEP, click_flow, make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.domain.execution import run_path
from workflows.infrastructure.models import ExecutionLog, Workflow, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def path_of(run) -> list[str]:
    """The keys of the steps the run went through (what the API's `path` shows)."""
    return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


SALE = "https://shop.example/sale?x=1&y=2"
EMAIL_STEP = SALE_EMAIL_STEP


@pytest.fixture
def mail(settings, smtp_server, live_server):  # noqa: F811 - the fixture imported above
    settings.MAILERS = smtp_server.mailers_setting()
    settings.RELAY_PUBLIC_URL = live_server.url
    return smtp_server


def send(account, contact, *, step=EMAIL_STEP, **workflow_fields) -> WorkflowExecution:
    workflow = make_workflow(account, [step])
    if workflow_fields:
        Workflow.objects.filter(pk=workflow.pk).update(**workflow_fields)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    return run


def parts(mail) -> tuple[str, str]:
    message = mail.parsed()
    return message.get_body(("plain",)).get_content(), message.get_body(("html",)).get_content()


def tracked_links(html: str, kind: str) -> list[str]:
    found = re.findall(r'(?:href|src)="([^"]+)"', html)
    return [html_lib.unescape(url) for url in found if f"/t/{kind}/" in url]


def test_the_links_and_the_pixel_of_a_sent_email_work_over_http(account, contact, mail, live_server):
    run = send(account, contact)
    text, html = parts(mail)
    (click,) = tracked_links(html, "c")
    (pixel,) = tracked_links(html, "o")
    assert "https://shop.example" not in html  # the link shows only through the signed redirect
    assert "mailto:help@shop.example" in html  # not a web link: as written
    assert re.search(r'<a href="[^"]+/unsubscribe/[^"]+/">Unsubscribe</a>', html)  # never tracked
    (text_click,) = re.findall(r"https?://\S+/t/c/\S+/", text)
    assert "/unsubscribe/" in text
    log = ExecutionLog.objects.get(execution=run)
    assert log.response_data["tracked"] is True
    assert log.response_data["tracked_links"] == 2

    answer = requests.get(click, allow_redirects=False, timeout=10)
    assert answer.status_code == 302
    assert answer.headers["Location"] == SALE
    assert requests.get(text_click, allow_redirects=False, timeout=10).headers["Location"] == SALE
    again = requests.get(click, allow_redirects=False, timeout=10)
    assert again.status_code == 302  # a second click still goes there ...

    events = list(Event.objects.filter(contact=contact).order_by("occurred_at"))
    # ... and counts once per (run, step, link); the click was also the open (images may be blocked).
    assert [e.name for e in events] == ["email.opened", "email.clicked"]
    opened, clicked = events
    assert clicked.data == {"run": str(run.pk), "step": "step_1", "link": SALE}
    assert opened.data == {"run": str(run.pk), "step": "step_1"}
    assert clicked.account_id == account.pk

    gif = requests.get(pixel, timeout=10)
    assert gif.status_code == 200
    assert gif.headers["Content-Type"] == "image/gif"
    assert gif.content.startswith(b"GIF89a")
    assert "no-cache" in gif.headers["Cache-Control"]
    assert Event.objects.filter(contact=contact, name="email.opened").count() == 1


def test_a_pixel_alone_records_the_open(account, contact, mail):
    send(account, contact)
    (pixel,) = tracked_links(parts(mail)[1], "o")
    assert requests.head(pixel, timeout=10).status_code == 200  # HEAD records nothing
    assert not Event.objects.exists()
    assert requests.get(pixel, timeout=10).status_code == 200
    assert list(Event.objects.values_list("name", flat=True)) == ["email.opened"]


def test_a_tampered_or_expired_token_is_a_plain_404_and_records_nothing(account, contact, mail, live_server, settings):
    send(account, contact)
    (click,) = tracked_links(parts(mail)[1], "c")
    token = click.rstrip("/").rsplit("/", 1)[1]
    payload, _, signature = token.rpartition(":")
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    for bad in (
        f"{payload}:{flipped}",
        f"{payload[:-2]}:{signature}",
        "not-a-token",
    ):
        answer = requests.get(f"{live_server.url}/t/c/{bad}/", allow_redirects=False, timeout=10)
        assert answer.status_code == 404
        assert answer.text == "not found"
        assert "Location" not in answer.headers
    # A click token is no open token (each kind has its own salt), and the other way round.
    assert requests.get(f"{live_server.url}/t/o/{token}/", timeout=10).status_code == 404
    settings.RELAY_TRACKING_MAX_AGE_DAYS = 0  # every token issued is now too old
    assert requests.get(click, allow_redirects=False, timeout=10).status_code == 404
    assert not Event.objects.exists()


def test_tracking_is_switched_off_per_workflow_or_by_the_account_default(account, contact, mail):
    def sent_links() -> tuple[list[str], str]:
        text, html = parts(mail)
        return tracked_links(html, "c") + tracked_links(html, "o"), text

    send(account, contact, track_email_engagement=False)
    links, text = sent_links()
    assert links == []
    assert "https://shop.example/sale?x=1&y=2." in text
    assert 'href="https://shop.example/sale?x=1&amp;y=2"' in parts(mail)[1]

    Account.objects.filter(pk=account.pk).update(track_email_engagement=False)
    send(account, contact)  # the workflow follows the account
    assert sent_links()[0] == []
    send(account, contact, track_email_engagement=True)  # the workflow's own switch wins
    assert len(sent_links()[0]) == 2


def test_a_click_starts_a_workflow_triggered_by_email_clicked(account, contact, mail):
    follow_up = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "clicked"}}],
        trigger={"type": "event", "event": "email.clicked"},
        name="Clicked",
    )
    send(account, contact)
    (click,) = tracked_links(parts(mail)[1], "c")
    requests.get(click, allow_redirects=False, timeout=10)
    requests.get(click, allow_redirects=False, timeout=10)  # counted once: one run, not two
    runs = WorkflowExecution.objects.filter(workflow=follow_up)
    assert runs.count() == 1
    assert runs.get().context["trigger"]["link"] == SALE
    run_due_jobs()
    contact.refresh_from_db()
    assert "clicked" in contact.tags


def test_what_a_runs_emails_came_to_by_step(account, contact, mail):
    from workflows.application.engagement import email_engagement

    run = send(account, contact)
    assert email_engagement(run_id=str(run.pk), contact_id=contact.pk) == {}
    (click,) = tracked_links(parts(mail)[1], "c")
    requests.get(click, allow_redirects=False, timeout=10)
    assert email_engagement(run_id=str(run.pk), contact_id=contact.pk) == {
        "step_1": {"opened": True, "clicked": True, "links": [SALE]}
    }


CLICK_FLOW = click_flow(3600)


def test_a_click_on_the_tracked_link_wakes_the_wait_and_the_branch_sees_it(account, contact, mail):
    workflow = make_workflow(account, CLICK_FLOW)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "waiting"
    (click,) = tracked_links(parts(mail)[1], "c")
    requests.get(click, allow_redirects=False, timeout=10)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert path_of(run) == ["welcome", "wait_click", "decide", "tag_engaged"]
    contact.refresh_from_db()
    assert "engaged" in contact.tags
    decisions = [
        d for d in ExecutionLog.objects.filter(execution=run).order_by("id").values_list("decision", flat=True) if d
    ]
    assert [d["kind"] for d in decisions] == ["event", "branch"]
    assert decisions[1]["values"] == {"steps.welcome.clicked": True}
    assert len(mail.messages) == 1  # no reminder
