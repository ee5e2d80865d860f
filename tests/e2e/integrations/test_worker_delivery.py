"""A real `runworker` process delivers email, SMS and webhooks, configured only through its environment.

Proves the channels read settings at call time from the worker's environment (EMAIL_URL, SMS_PROVIDER,
TWILIO_*, WEBHOOK_ALLOWED_HOSTS as a bare host), that retries of one job keep one webhook-id, and that a
refused webhook target ends the job failed at once, with a stored error that holds no path or token.
"""

import hashlib
import hmac
from base64 import b64decode, b64encode

import pytest

from integrations.infrastructure.models import WebhookSigningSecret
from jobs.application.queue import enqueue
from jobs.models import Job
from tests.e2e.integrations import handlers  # noqa: F401 - registers the handler names in this process too
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CANARY = "e2eCanary5d41402a"


def test_the_worker_delivers_through_every_channel(start_worker, http_sink, smtp_server, fake_twilio, contact):
    worker = start_worker(
        JOB_HANDLER_MODULES="tests.e2e.integrations.handlers",
        JOB_POLL_INTERVAL="0.2",
        JOB_RETRY_DELAY_SECONDS="0.2",
        JOB_RETRY_JITTER="0",
        EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}",
        RELAY_PUBLIC_URL="https://relay.example",
        SMS_PROVIDER="twilio",
        TWILIO_ACCOUNT_SID=fake_twilio.account_sid,
        TWILIO_AUTH_TOKEN=fake_twilio.auth_token,
        TWILIO_FROM_NUMBER="+15550100000",
        TWILIO_BASE_URL=fake_twilio.base_url(),
        WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
    )
    account = contact.account
    flaky = enqueue(
        "integrations_e2e.webhook",
        {"url": http_sink.url(f"/flaky/2/e2e?token={CANARY}"), "body": {"n": 1}},
        account=account,
        max_attempts=5,
    )
    refused = enqueue(
        "integrations_e2e.webhook",
        {"url": f"http://169.254.169.254/latest/{CANARY}?t={CANARY}", "body": {}},
        account=account,
        max_attempts=5,
    )
    enqueue(
        "integrations_e2e.email",
        {"to": contact.email, "subject": "Hi", "text": "Hello", "html": "<p>Hello</p>", "contact_id": contact.pk},
        account=account,
    )
    enqueue("integrations_e2e.sms", {"to": contact.phone, "body": "Hello by SMS"}, account=account)

    def finished() -> bool:
        return (
            Job.objects.filter(pk__in=[flaky.id, refused.id])
            .exclude(status__in=["pending", "running", "retrying"])
            .count()
            == 2
        )

    wait_until(lambda: finished() and smtp_server.messages and fake_twilio.requests, 60, "all deliveries")

    # The webhook: two 503s, then 200; one webhook-id across the three attempts, each signed.
    attempts = http_sink.requests_to("/flaky/2/e2e")
    assert len(attempts) == 3
    assert {a.header("webhook-id") for a in attempts} == {f"job-{flaky.id}"}
    secret = WebhookSigningSecret.objects.get(account=account).secret
    key = b64decode(secret.removeprefix("whsec_"))
    for attempt in attempts:
        signed = f"{attempt.header('webhook-id')}.{attempt.header('webhook-timestamp')}.".encode() + attempt.body
        assert (
            attempt.header("webhook-signature")
            == "v1," + b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        )
    flaky_job = Job.objects.get(pk=flaky.id)
    assert flaky_job.status == "completed"
    assert flaky_job.attempt_number == 3
    assert CANARY not in flaky_job.error_message

    # The refused target: failed at once (permanent), the stored error says why and holds no token.
    refused_job = Job.objects.get(pk=refused.id)
    assert refused_job.status == "failed"
    assert refused_job.attempt_number == 1
    assert refused_job.error_message.startswith(
        "ValidationFailure: webhook target refused: 169.254.169.254 is the cloud metadata address"
    )
    assert CANARY not in refused_job.error_message
    assert CANARY not in worker.output()

    # Email over SMTP with the one-click unsubscribe header on the public URL; SMS through the provider.
    received = smtp_server.parsed()
    assert received["List-Unsubscribe"].startswith("<https://relay.example/unsubscribe/")
    assert fake_twilio.requests[0].form["To"] == [contact.phone]
