"""Bulk starts, the run limit under concurrent starts, and a pause that lands while a webhook is in flight."""

import threading

import pytest
from django.db import connection

from jobs.infrastructure.models import Job
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.operating import pause_run, resume_run
from workflows.application.runs.starting import start_run, start_runs
from workflows.domain.errors import ConcurrentExecutionLimitError, WorkflowNotActive, WorkflowValidationError
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

TAG_STEP = {"action_type": "add_tag", "config": {"tag": "done"}}


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_start_many_enrolls_a_list_in_one_go(account):
    workflow = make_workflow(account, [TAG_STEP], reenrollment="never")
    contacts = ContactFactory.create_batch(5, account=account)
    start_run(workflow_id=workflow.pk, contact_id=contacts[0].pk)
    ids = [c.pk for c in contacts]
    result = start_runs(workflow_id=workflow.pk, contact_ids=[*ids, ids[1]], trigger_data={"campaign": "spring"})
    assert len(result.execution_ids) == 4  # the duplicate id counts once
    assert result.skipped == [(ids[0], "the contact was already enrolled in this workflow (re-enrollment: never)")]
    runs = WorkflowExecution.objects.filter(pk__in=result.execution_ids)
    assert sorted(runs.values_list("contact_id", flat=True)) == sorted(ids[1:])
    assert all(r.context["trigger"] == {"campaign": "spring"} for r in runs)
    assert all(r.status == "queued" for r in runs)
    jobs = Job.objects.filter(pk__in=runs.values_list("next_job_id", flat=True))
    assert jobs.count() == 4
    assert all(j.handler == "workflow_step" and j.account_id == account.pk for j in jobs)
    assert run_due_jobs() == 5
    assert WorkflowExecution.objects.filter(status="completed").count() == 5


@pytest.mark.django_db
def test_start_many_is_all_or_nothing_against_the_limit(account):
    account.max_concurrent_executions = 3
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [TAG_STEP])
    contacts = ContactFactory.create_batch(4, account=account)
    with pytest.raises(ConcurrentExecutionLimitError):
        start_runs(workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts])
    assert not WorkflowExecution.objects.exists()
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_list_the_rule_keeps_out_is_answered_with_its_skips_even_over_the_limit(account):
    """Each contact passes the one enrollment gate, re-enrollment before the limit, as a single start does: a
    list that would start nothing reports its skips rather than a 429 that waiting would never clear."""
    workflow = make_workflow(account, [TAG_STEP], reenrollment="never")
    contacts = ContactFactory.create_batch(2, account=account)
    for contact in contacts:
        start_run(workflow_id=workflow.pk, contact_id=contact.pk)
    account.max_concurrent_executions = 1  # two runs queued: over the limit
    account.save(update_fields=["max_concurrent_executions"])
    result = start_runs(workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts])
    assert result.execution_ids == []
    assert [contact_id for contact_id, _ in result.skipped] == [c.pk for c in contacts]
    assert WorkflowExecution.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("contact_ids", "reason"),
    [
        ([], "must not be empty"),
        ("1,2", "must be a list of contact ids"),
        ([1, "2"], "must hold whole numbers"),
        (list(range(1, 10_002)), "at most 10,000"),
    ],
)
def test_start_many_refuses_bad_lists(account, contact_ids, reason):
    workflow = make_workflow(account, [TAG_STEP])
    with pytest.raises(WorkflowValidationError) as info:
        start_runs(workflow_id=workflow.pk, contact_ids=contact_ids)
    assert reason in info.value.as_dict()["contact_ids"][0]


@pytest.mark.django_db
def test_start_many_refuses_unknown_contacts_and_inactive_workflows(account, other_account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    stranger = ContactFactory(account=other_account)
    with pytest.raises(WorkflowValidationError) as info:
        start_runs(workflow_id=workflow.pk, contact_ids=[contact.pk, stranger.pk])
    assert info.value.as_dict() == {"contact_ids": [f"no such contacts in this account: {stranger.pk}"]}
    draft = make_workflow(account, [TAG_STEP], publish=False)
    with pytest.raises(WorkflowNotActive):
        start_runs(workflow_id=draft.pk, contact_ids=[contact.pk])
    assert not WorkflowExecution.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_never_pass_the_limit():
    """Eight threads start runs at once; the account row lock lets exactly `limit` of them through."""
    account = AccountFactory(max_concurrent_executions=3)
    workflow = make_workflow(account, [TAG_STEP])
    contacts = ContactFactory.create_batch(8, account=account)
    barrier = threading.Barrier(len(contacts))
    outcomes: list[str] = []
    lock = threading.Lock()

    def start(contact_id: int) -> None:
        try:
            barrier.wait(timeout=10)
            start_run(workflow_id=workflow.pk, contact_id=contact_id)
            result = "started"
        except ConcurrentExecutionLimitError:
            result = "refused"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=start, args=(c.pk,)) for c in contacts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["refused"] * 5 + ["started"] * 3
    assert WorkflowExecution.objects.count() == 3
    assert Job.objects.count() == 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_idempotency_key_at_once_gives_one_run():
    account = AccountFactory()
    contact = ContactFactory(account=account)
    workflow = make_workflow(account, [TAG_STEP])
    barrier = threading.Barrier(6)
    results: list[tuple] = []
    lock = threading.Lock()

    def start() -> None:
        try:
            barrier.wait(timeout=10)
            started = start_run(workflow_id=workflow.pk, contact_id=contact.pk, idempotency_key="k1")
            with lock:
                results.append((started.execution.pk, started.created))
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 6
    assert len({pk for pk, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert WorkflowExecution.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_pause_while_the_webhook_is_in_flight_records_the_step_and_holds_the_next(webhook_server, settings):
    """The receiver pauses the run while answering: the step is logged, the run advances, nothing is queued."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    account = AccountFactory()
    contact = ContactFactory(account=account)
    workflow = make_workflow(
        account,
        [{"action_type": "webhook", "config": {"url": webhook_server.url}}, TAG_STEP],
    )
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    seen: list[str] = []
    original_answers = webhook_server.answers

    def pause_during_request() -> None:
        try:
            paused = pause_run(execution_id=run.pk)
            seen.append(paused.status)
        finally:
            connection.close()

    class PausingAnswers(list):
        def __getitem__(self, index):
            thread = threading.Thread(target=pause_during_request)
            thread.start()
            thread.join(10)
            return original_answers[0]

    webhook_server.answers = PausingAnswers(original_answers)
    assert run_due_jobs(1) == 1
    assert seen == ["paused"]
    run.refresh_from_db()
    assert run.status == "paused"
    assert run.current_step_index == 1  # the step that was in flight is done
    assert run.next_job_id is None  # and nothing more is queued while paused
    assert list(ExecutionLog.objects.filter(execution=run).values_list("outcome", flat=True)) == ["succeeded"]
    assert run_due_jobs() == 0
    resume_run(execution_id=run.pk)
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
