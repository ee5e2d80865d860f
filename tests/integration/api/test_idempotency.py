"""The remembered answers of Idempotency-Key requests: storage, expiry, the purge job, and racing retries."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from idempotency.application.services import purge_expired, remember
from idempotency.domain.keys import Answer, KeyReused
from idempotency.models import IdempotencyRecord
from jobs.application.registry import get_handler
from jobs.application.schedules import sync_schedules
from jobs.infrastructure.models import Schedule
from tests.factories import ContactFactory, MembershipFactory
from tests.integration.api.conftest import client_for
from tests.integration.workflows.support import make_workflow
from workflows.models import WorkflowExecution


@pytest.mark.django_db
def test_the_work_and_its_answer_commit_together(account):
    calls = []

    def produce() -> Answer:
        calls.append(1)
        return Answer(201, '{"id":1}', {"Location": "/x"})

    first = remember(account_id=account.pk, key="k", fingerprint="f", produce=produce)
    again = remember(account_id=account.pk, key="k", fingerprint="f", produce=produce)
    assert (first.replayed, again.replayed) == (False, True)
    assert again.answer == Answer(201, '{"id":1}', {"Location": "/x"})
    assert len(calls) == 1
    with pytest.raises(KeyReused):
        remember(account_id=account.pk, key="k", fingerprint="other", produce=produce)
    record = IdempotencyRecord.objects.get()
    assert timedelta(hours=23, minutes=59) < record.expires_at - record.created_at <= timedelta(hours=24)


@pytest.mark.django_db
def test_a_failure_or_a_refusal_leaves_no_record(account):
    def fail() -> Answer:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        remember(account_id=account.pk, key="k", fingerprint="f", produce=fail)
    assert (
        remember(account_id=account.pk, key="k", fingerprint="f", produce=lambda: Answer(409, "{}")).answer.status
        == 409
    )
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.django_db
def test_the_ttl_comes_from_settings(account, settings):
    settings.API_IDEMPOTENCY_KEY_TTL_HOURS = 1
    remember(account_id=account.pk, key="k", fingerprint="f", produce=lambda: Answer(200, "{}"))
    record = IdempotencyRecord.objects.get()
    assert record.expires_at - record.created_at <= timedelta(hours=1)


@pytest.mark.django_db
def test_the_purge_job_deletes_expired_keys_only(account, other_account):
    now = timezone.now()
    for index, (owner, expires) in enumerate(
        [
            (account, now - timedelta(minutes=1)),
            (other_account, now - timedelta(days=3)),
            (account, now + timedelta(hours=1)),
        ]
    ):
        IdempotencyRecord.objects.create(
            account=owner, key=f"k{index}", fingerprint="f", status_code=201, body="{}", expires_at=expires
        )
    assert purge_expired(chunk=1) == 2
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["k2"]
    get_handler("idempotency.purge")({}, None)  # registered, and harmless with nothing to do
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.django_db
def test_the_purge_is_scheduled_hourly_for_the_workers():
    sync_schedules()
    schedule = Schedule.objects.get(name="relay.purge_idempotency_keys")
    assert schedule.handler == "idempotency.purge"
    assert schedule.cron == "41 * * * *"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_retries_racing_with_one_key_start_one_run():
    """Both requests claim the key at once: PostgreSQL makes the second wait, then it replays the first answer."""
    membership = MembershipFactory(role="owner")
    account = membership.account
    contact = ContactFactory(account=account)
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}], reenrollment="always")
    clients = [client_for(membership.user, account) for _ in range(2)]
    barrier = threading.Barrier(2)
    answers = [None, None]

    def call(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            answers[index] = clients[index].post(
                f"/api/v1/workflows/{workflow.pk}/executions",
                {"contact": contact.pk},
                format="json",
                HTTP_IDEMPOTENCY_KEY="race",
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [a.status_code for a in answers] == [201, 201]
    assert answers[0].content == answers[1].content
    assert sorted(a.has_header("Idempotent-Replayed") for a in answers) == [False, True]
    assert WorkflowExecution.objects.count() == 1
    assert IdempotencyRecord.objects.count() == 1
