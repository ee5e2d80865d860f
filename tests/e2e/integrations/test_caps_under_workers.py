"""A frequency cap holds across real workers: three `runworker` processes, four handlers each, send twelve
`send_email` jobs to one contact under a cap of three a day. Exactly three emails arrive; the nine others are
deferred by the door and their jobs snoozed (not failed, no attempt spent), each ledger row saying until when.

The whole path on real processes; that the cap is exact when senders truly overlap (the contact's row lock)
is held by tests/integration/integrations/test_outbound_concurrency.py, whose barrier makes them overlap."""

from __future__ import annotations

import pytest

from integrations.application.sending_rules import sending_settings_set
from integrations.infrastructure.models import OutboundMessage
from jobs.application.queue import JobSpec, enqueue_many
from jobs.models import Job
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

JOBS = 12
CAP = 3


def test_twelve_jobs_on_three_workers_send_three_emails_to_a_contact_capped_at_three(
    start_worker, smtp_server, contact
):
    account = contact.account
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": CAP, "days": 1}])
    env = {"EMAIL_URL": f"smtp://127.0.0.1:{smtp_server.port}", "JOB_POLL_INTERVAL": "0.2"}
    workers = [start_worker("--concurrency", "4", **env) for _ in range(3)]
    wait_until(lambda: all(" started: " in worker.output() for worker in workers), 60, "three workers at work")
    specs = [
        JobSpec(
            "send_email",
            {"to": contact.email, "subject": f"Offer {i}", "text": "Hi", "account": account.pk, "contact": contact.pk},
            account=account,
        )
        for i in range(JOBS)
    ]
    ids = enqueue_many(specs)

    def settled() -> bool:
        jobs = Job.objects.filter(pk__in=ids)
        done = jobs.filter(status="completed").count()
        snoozed = jobs.filter(status="pending", snoozes__gt=0).count()
        return done + snoozed == JOBS

    wait_until(settled, 60, "every job sent or snoozed")
    assert len(smtp_server.messages) == CAP
    rows = OutboundMessage.objects.filter(contact=contact)
    assert rows.filter(status="sent").count() == CAP
    deferred = rows.filter(status="deferred")
    assert deferred.count() == JOBS - CAP
    assert all(row.rule == "frequency_cap" and row.deferred_until is not None for row in deferred)
    jobs = Job.objects.filter(pk__in=ids)
    assert jobs.filter(status="completed").count() == CAP
    # Waiting is not failing: no snoozed job spent an attempt.
    assert not jobs.filter(status="pending", attempt_number__gt=0).exists()
