"""webhook_delivery and send_email: queued with enqueue() by any Django code, run by a real worker in this
process against real loopback HTTP and SMTP servers."""

import json
import time

import pytest

from integrations.application.secrets import webhook_signing_secrets_cached
from integrations.domain.signing import verify
from jobs.application.queue import InvalidJob, enqueue
from jobs.application.worker import Worker
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.factories import ContactFactory

pytestmark = pytest.mark.django_db(transaction=True)


def run_worker() -> None:
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()


def stored(job) -> Job:
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def fast_retries(settings):
    settings.JOB_RETRY_DELAY_SECONDS = 0
    settings.JOB_RETRY_JITTER = 0


def test_a_webhook_is_signed_with_the_account_secret_and_keeps_its_id_across_retries(
    webhook_settings, http_sink, account, fast_retries
):
    flaky = enqueue(
        "webhook_delivery",
        {"url": http_sink.url("/flaky/1/a"), "headers": {"X-Shop": "7"}, "body": {"order": 42}, "account": account.pk},
    )
    run_worker()
    assert (stored(flaky).status, stored(flaky).attempt_number) == (JobStatus.COMPLETED, 2)
    first, second = http_sink.requests_to("/flaky/1/a")
    assert first.method == second.method == "POST"
    assert first.header("webhook-id") == second.header("webhook-id") == f"job_{flaky.pk}"
    assert first.header("X-Shop") == "7"
    assert json.loads(second.body) == {"order": 42}
    (secret,) = webhook_signing_secrets_cached(account_id=account.pk)
    assert verify(secret, headers=second.headers, body=second.body, now=int(time.time()))


@pytest.mark.parametrize(
    ("code", "status", "kind", "attempts"),
    [
        (400, JobStatus.FAILED, "ValidationFailure", 1),
        (401, JobStatus.FAILED, "AuthFailure", 1),
        (503, JobStatus.DEAD, "ServerFailure", 2),
    ],
)
def test_failures_are_classified_as_the_workflow_webhook_step_classifies_them(
    webhook_settings, http_sink, fast_retries, code, status, kind, attempts
):
    url = http_sink.url(f"/status/{code}") + "?token=SECRET"
    job = enqueue("webhook_delivery", {"url": url, "method": "PUT"}, max_attempts=2)
    run_worker()
    job = stored(job)
    assert (job.status, job.attempt_number) == (status, attempts)
    assert job.error_message.startswith(f"{kind}: webhook http://127.0.0.1:{http_sink.port} answered {code}")
    assert "SECRET" not in job.error_message
    assert "/status" not in job.error_message


def test_a_rate_limited_webhook_waits_what_the_receiver_asked(webhook_settings, http_sink):
    job = enqueue("webhook_delivery", {"url": http_sink.url("/limited/seconds")})
    run_worker()
    job = stored(job)
    assert (job.status, job.retry_delay_seconds) == (JobStatus.RETRYING, 7.0)


def test_the_ssrf_guard_refuses_a_private_target_for_good(webhook_settings):
    job = enqueue("webhook_delivery", {"url": "http://10.0.0.7/hook/SECRET"})
    run_worker()
    job = stored(job)
    assert (job.status, job.attempt_number) == (JobStatus.FAILED, 1)
    assert job.error_message.startswith("ValidationFailure: webhook target refused: 10.0.0.7")
    assert "SECRET" not in job.error_message


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "payload.url"),
        ({"url": 5}, "payload.url"),
        ({"url": "ftp://files.example.com/x"}, "payload.url"),
        ({"url": "https://h.example.com", "method": "TRACE"}, "payload.method"),
        ({"url": "https://h.example.com", "headers": {"X": 1}}, "payload.headers"),
        ({"url": "https://h.example.com", "account": "acme"}, "payload.account"),
        ({"url": "https://h.example.com", "bdoy": {}}, "payload.bdoy"),
    ],
)
def test_a_webhook_payload_that_cannot_run_is_refused_at_enqueue_naming_the_key(payload, field):
    with pytest.raises(InvalidJob) as refused:
        enqueue("webhook_delivery", payload)
    assert refused.value.field == field
    assert not Job.objects.exists()


@pytest.fixture
def smtp_settings(settings, smtp_server):
    settings.MAILERS = smtp_server.mailers_setting()
    settings.RELAY_PUBLIC_URL = "https://relay.example"
    return settings


def test_an_email_to_a_contact_carries_its_unsubscribe_link_and_one_to_a_stranger_none(
    smtp_settings, smtp_server, account
):
    contact = ContactFactory(account=account, email="Ada@Example.com")
    to_contact = enqueue(
        "send_email",
        {"to": "ada@example.com", "subject": "Order", "text": "Thanks", "html": "<p>Thanks</p>", "account": account.pk},
    )
    to_stranger = enqueue(
        "send_email",
        {
            "to": "bob@example.com",
            "subject": "Hi",
            "text": "Hello",
            "account": account.pk,
            "from": "Shop <s@shop.example>",
        },
    )
    run_worker()
    assert stored(to_contact).status == stored(to_stranger).status == JobStatus.COMPLETED
    by_recipient = {tuple(rcpt): i for i, (_sender, rcpt, _data) in enumerate(smtp_server.messages)}
    contact_mail = smtp_server.parsed(by_recipient[("ada@example.com",)])
    assert contact_mail["List-Unsubscribe"].startswith("<https://relay.example/unsubscribe/")
    assert contact_mail["Subject"] == "Order"
    stranger_mail = smtp_server.parsed(by_recipient[("bob@example.com",)])
    assert stranger_mail["List-Unsubscribe"] is None
    assert stranger_mail["From"] == "Shop <s@shop.example>"
    assert contact.pk


def test_consent_is_law_an_unsubscribed_contact_gets_no_email(smtp_settings, smtp_server, account):
    contact = ContactFactory(account=account, unsubscribed=True)
    by_address = enqueue("send_email", {"to": contact.email, "subject": "S", "text": "T", "account": account.pk})
    by_id = enqueue(
        "send_email",
        {"to": "other@example.com", "subject": "S", "text": "T", "account": account.pk, "contact": contact.pk},
    )
    run_worker()
    assert stored(by_address).status == stored(by_id).status == JobStatus.COMPLETED
    assert smtp_server.messages == []
    # The job says it was skipped, and why (README: "the job completes as skipped").
    for job in (by_address, by_id):
        result = stored(job).result
        assert (result["skipped"], result["contact"]) == ("unsubscribed", contact.pk), result
        assert "unsubscribed" in result["reason"], result
    sent = enqueue("send_email", {"to": "stranger@example.com", "subject": "S", "text": "T", "account": account.pk})
    run_worker()
    assert stored(sent).result is None  # a sent email keeps nothing: nothing to explain


def test_an_email_payload_is_checked_at_enqueue(account):
    with pytest.raises(InvalidJob) as refused:
        enqueue("send_email", {"to": "a@example.com", "text": "no subject"})
    assert refused.value.field == "payload.subject"
    with pytest.raises(InvalidJob) as refused:
        enqueue("send_email", {"to": "a@example.com", "subject": "s", "text": "t", "contact": 3})
    assert refused.value.field == "payload.account"


def test_an_email_outside_its_send_window_snoozes_its_job_until_the_opening(smtp_settings, smtp_server, account):
    """The door answers Deferred: the job snoozes to the window's opening, no attempt spent, nothing sent; once
    the window lets it go, the same job sends it."""
    from datetime import timedelta

    from django.utils import timezone

    from integrations.application.sending_rules import sending_settings_set

    opens = (timezone.now() + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    end = "24:00" if opens.hour == 23 else f"{opens.hour + 1:02d}:00"
    window = {"days": ["mon-sun"], "hours": [f"{opens.hour:02d}:00-{end}"], "spread": 0}
    sending_settings_set(account_id=account.pk, send_windows={"email": window})
    contact = ContactFactory(account=account, time_zone="UTC")
    job = enqueue(
        "send_email", {"to": contact.email, "subject": "S", "text": "T", "account": account.pk}, max_attempts=1
    )
    run_worker()
    waiting = stored(job)
    assert (waiting.status, waiting.attempt_number, waiting.snoozes) == (JobStatus.PENDING, 0, 1)
    assert abs((waiting.run_at - opens).total_seconds()) < 1  # seconds from the handler's now: to the ms
    assert smtp_server.messages == []
    sending_settings_set(account_id=account.pk, send_windows={"email": None})
    Job.objects.filter(pk=job.pk).update(run_at=timezone.now())
    run_worker()
    sent = stored(job)
    assert (sent.status, sent.attempt_number, sent.snoozes) == (JobStatus.COMPLETED, 1, 1)  # its one attempt
    assert len(smtp_server.messages) == 1
