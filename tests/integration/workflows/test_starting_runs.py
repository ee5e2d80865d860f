"""Starting runs: the version, the limit, idempotency, re-enrollment, events, filters and the chain guard."""

import pytest

from contacts.application.services import contact_add_tag, contact_create, contact_update
from jobs.infrastructure.models import Job
from tests.factories import ContactFactory
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.errors import ContactNotFound, WorkflowNotFound
from workflows.application.runs.operating import cancel_run, pause_run
from workflows.application.runs.starting import record_event, start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import (
    ConcurrentExecutionLimitError,
    EnrollmentRefused,
    IdempotencyConflict,
    WorkflowNotActive,
    WorkflowValidationError,
)
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db

TAG_STEP = {"action_type": "add_tag", "config": {"tag": "done"}}


def test_start_queues_the_first_step_on_the_current_version(account, contact):
    workflow = make_workflow(account, [TAG_STEP, TAG_STEP])
    started = start_run(workflow_id=workflow.pk, contact_id=contact.pk, trigger_data={"plan": "pro"})
    run = started.execution
    assert started.created
    assert run.status == "queued"
    assert run.version_id == workflow.current_version_id
    assert run.step_count == 2
    assert run.context == {"event": "", "trigger": {"plan": "pro"}, "steps": [], "step_keys": []}
    assert run.current_step_key == "step_1"
    job = Job.objects.get(pk=run.next_job_id)
    assert job.handler == "workflow_step"
    assert job.payload == {"execution_id": str(run.pk), "step_index": 0, "version_id": str(run.version_id)}
    assert job.queue == "workflows"
    assert job.account_id == account.pk  # per-account fairness applies to steps


def test_only_an_active_workflow_takes_runs(account, contact):
    draft = make_workflow(account, [TAG_STEP], publish=False)
    with pytest.raises(WorkflowNotActive):
        start_run(workflow_id=draft.pk, contact_id=contact.pk)
    paused = make_workflow(account, [TAG_STEP])
    WorkflowService().pause(workflow_id=paused.pk)
    with pytest.raises(WorkflowNotActive):
        start_run(workflow_id=paused.pk, contact_id=contact.pk)
    assert not WorkflowExecution.objects.exists()
    assert not Job.objects.exists()


def test_start_is_scoped_to_the_account(account, other_account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    with pytest.raises(WorkflowNotFound):
        start_run(workflow_id=workflow.pk, contact_id=contact.pk, account_id=other_account.pk)
    stranger = ContactFactory(account=other_account)
    with pytest.raises(ContactNotFound):
        start_run(workflow_id=workflow.pk, contact_id=stranger.pk)


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"trigger_data": ["not", "an", "object"]}, "trigger_data"),
        ({"trigger_data": {"x": object()}}, "trigger_data"),
        ({"trigger_data": {"x": "y" * 70_000}}, "trigger_data"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "k" * 201}, "idempotency_key"),
        ({"source": "carrier-pigeon"}, "source"),
    ],
)
def test_bad_input_is_refused_with_its_field(account, contact, kwargs, path):
    workflow = make_workflow(account, [TAG_STEP])
    with pytest.raises(WorkflowValidationError) as info:
        start_run(workflow_id=workflow.pk, contact_id=contact.pk, **kwargs)
    assert list(info.value.as_dict()) == [path]
    assert not WorkflowExecution.objects.exists()


def test_the_same_idempotency_key_gives_the_same_run(account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    first = start_run(workflow_id=workflow.pk, contact_id=contact.pk, idempotency_key="order-1")
    again = start_run(workflow_id=workflow.pk, contact_id=contact.pk, idempotency_key="order-1")
    assert first.created
    assert not again.created
    assert again.execution.pk == first.execution.pk
    assert WorkflowExecution.objects.count() == 1
    assert Job.objects.count() == 1
    other = ContactFactory(account=account)
    with pytest.raises(IdempotencyConflict):
        start_run(workflow_id=workflow.pk, contact_id=other.pk, idempotency_key="order-1")


def test_idempotency_keys_are_per_account(account, other_account, contact):
    mine = make_workflow(account, [TAG_STEP])
    theirs = make_workflow(other_account, [TAG_STEP])
    stranger = ContactFactory(account=other_account)
    a = start_run(workflow_id=mine.pk, contact_id=contact.pk, idempotency_key="k").execution
    b = start_run(workflow_id=theirs.pk, contact_id=stranger.pk, idempotency_key="k").execution
    assert a.pk != b.pk


def test_the_run_beyond_the_limit_is_refused_and_nothing_is_stored(account):
    account.max_concurrent_executions = 2
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [TAG_STEP])
    contacts = ContactFactory.create_batch(3, account=account)
    for contact in contacts[:2]:
        start_run(workflow_id=workflow.pk, contact_id=contact.pk)
    runs, jobs = WorkflowExecution.objects.count(), Job.objects.count()
    with pytest.raises(ConcurrentExecutionLimitError) as info:
        start_run(workflow_id=workflow.pk, contact_id=contacts[2].pk, idempotency_key="late")
    assert info.value.limit == 2
    assert info.value.in_progress == 2
    assert (WorkflowExecution.objects.count(), Job.objects.count()) == (runs, jobs)
    assert not WorkflowExecution.objects.filter(idempotency_key="late").exists()


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_waiting_and_paused_runs_do_not_count_toward_the_limit(account):
    account.max_concurrent_executions = 1
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [{"action_type": "wait", "config": {"duration": "1h"}}, TAG_STEP])
    first, second, third = ContactFactory.create_batch(3, account=account)
    run = start_run(workflow_id=workflow.pk, contact_id=first.pk).execution
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "waiting"
    paused = start_run(workflow_id=workflow.pk, contact_id=second.pk).execution
    pause_run(execution_id=paused.pk)
    start_run(workflow_id=workflow.pk, contact_id=third.pk)  # one QUEUED now: the limit is reached
    with pytest.raises(ConcurrentExecutionLimitError):
        start_run(workflow_id=workflow.pk, contact_id=ContactFactory(account=account).pk)


@pytest.mark.parametrize(
    ("rule", "again_while_running", "again_after_end"),
    [("never", False, False), ("after_finish", False, True), ("always", True, True)],
)
def test_reenrollment_rules(account, contact, rule, again_while_running, again_after_end):
    workflow = make_workflow(account, [TAG_STEP], reenrollment=rule)
    first = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution

    def try_start() -> bool:
        try:
            start_run(workflow_id=workflow.pk, contact_id=contact.pk)
        except EnrollmentRefused as exc:
            refusals.append(str(exc))
            return False
        return True

    refusals: list[str] = []

    assert try_start() is again_while_running
    WorkflowExecution.objects.exclude(pk=first.pk).delete()
    Job.objects.all().delete()
    cancel_run(execution_id=first.pk)
    assert try_start() is again_after_end
    assert all(rule in reason for reason in refusals)


def test_events_start_matching_active_workflows(account, contact):
    order = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"})
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.refunded"})
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"}, publish=False)
    outcome = record_event(account=account, contact=contact, name="order.paid", data={"total": 12})
    assert [run.workflow_id for run in outcome.started] == [order.pk]
    run = outcome.started[0]
    assert run.trigger_source == "event"
    assert run.trigger_event == "order.paid"
    assert run.context["trigger"] == {"total": 12}
    assert outcome.skipped == []


def test_event_filters_and_reenrollment_are_reported(account, contact):
    vip = make_workflow(
        account,
        [TAG_STEP],
        trigger={
            "type": "event",
            "event": "order.paid",
            "filter": [{"field": "tags", "op": "contains", "value": "vip"}],
        },
    )
    once = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"}, reenrollment="never")
    first = record_event(account=account.pk, contact=contact.pk, name="order.paid")
    assert [r.workflow_id for r in first.started] == [once.pk]
    assert [(s.workflow_id, s.reason) for s in first.skipped] == [
        (vip.pk, "the contact does not match the trigger's filter")
    ]
    second = record_event(account=account.pk, contact=contact.pk, name="order.paid")
    assert second.started == []
    assert {s.workflow_id for s in second.skipped} == {vip.pk, once.pk}


def test_an_event_at_the_limit_skips_instead_of_failing(account, contact):
    account.max_concurrent_executions = 0
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "ping"})
    outcome = record_event(account=account, contact=contact, name="ping")
    assert outcome.started == []
    assert outcome.skipped[0].workflow_id == workflow.pk
    assert "limit is 0" in outcome.skipped[0].reason


def test_bad_events_are_refused(account, contact):
    with pytest.raises(WorkflowValidationError) as info:
        record_event(account=account, contact=contact, name="no spaces please")
    assert list(info.value.as_dict()) == ["name"]
    with pytest.raises(WorkflowValidationError) as info:
        record_event(account=account, contact=contact, name="ok", data=[1])
    assert list(info.value.as_dict()) == ["data"]


def test_contact_changes_start_workflows_in_the_same_transaction(account):
    created = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "contact.created"})
    tagged = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "tag.added", "tag": "VIP"})
    updated = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "contact.updated"})
    contact = contact_create(account_id=account.pk, email="new@example.com", tags=["trial"])
    assert list(WorkflowExecution.objects.values_list("workflow_id", flat=True)) == [created.pk]
    contact_add_tag(contact_id=contact.pk, tag="vip")
    contact_update(contact_id=contact.pk, fields={"first_name": "Grace"})
    assert set(WorkflowExecution.objects.values_list("workflow_id", flat=True)) == {created.pk, tagged.pk, updated.pk}
    tag_run = WorkflowExecution.objects.get(workflow=tagged)
    assert tag_run.context["trigger"] == {"tag": "vip"}


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_workflows_chain_and_the_chain_guard_stops_loops(account, contact, settings):
    """A tags b, b's trigger is tag b... each workflow tags the next; the last one tags the first's tag again."""
    settings.WORKFLOW_MAX_CHAIN_DEPTH = 2
    names = ["a", "b", "c", "d"]
    workflows = {
        name: make_workflow(
            account,
            [{"action_type": "add_tag", "config": {"tag": names[(i + 1) % len(names)]}}],
            trigger={"type": "event", "event": "tag.added", "tag": name},
            name=f"on {name}",
        )
        for i, name in enumerate(names)
    }
    contact_add_tag(contact_id=contact.pk, tag="a")  # outside event: depth 0
    for _ in range(10):
        if not run_due_jobs():
            break
    runs = {r.workflow_id: r for r in WorkflowExecution.objects.all()}
    assert runs[workflows["a"].pk].depth == 0
    assert runs[workflows["b"].pk].depth == 1
    assert runs[workflows["b"].pk].parent_id == runs[workflows["a"].pk].pk
    assert runs[workflows["c"].pk].depth == 2
    assert workflows["d"].pk not in runs  # depth 3 > 2: cut
    assert all(r.status == "completed" for r in runs.values())


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_a_run_never_restarts_its_own_workflow(account, contact):
    loop = make_workflow(
        account,
        [{"action_type": "remove_tag", "config": {"tag": "x"}}, {"action_type": "add_tag", "config": {"tag": "x"}}],
        trigger={"type": "event", "event": "tag.added", "tag": "x"},
        reenrollment="always",
    )
    contact_add_tag(contact_id=contact.pk, tag="x")
    for _ in range(10):
        if not run_due_jobs():
            break
    assert WorkflowExecution.objects.filter(workflow=loop).count() == 1
    assert WorkflowExecution.objects.get().status == "completed"
