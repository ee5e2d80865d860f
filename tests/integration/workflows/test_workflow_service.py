"""WorkflowService: drafts, validation that stores nothing, publishing versions, status moves."""

import pytest

from workflows.application.errors import WorkflowNotFound
from workflows.application.selectors import has_unpublished_changes, workflow_get, workflow_versions
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import IllegalWorkflowTransition, WorkflowValidationError
from workflows.infrastructure.models import Workflow, WorkflowStep, WorkflowVersion

pytestmark = pytest.mark.django_db

STEPS = [
    {"name": "Tag", "action_type": "add_tag", "config": {"tag": "welcomed"}},
    {"name": "Email", "action_type": "send_email", "config": {"subject": "Hi {{ contact.first_name }}", "text": "x"}},
]


@pytest.fixture
def service():
    return WorkflowService()


def test_create_a_draft_with_steps(service, account):
    workflow = service.create(
        account_id=account.pk,
        name=" Welcome ",
        trigger={"type": "event", "event": "tag.added", "tag": "Trial"},
        reenrollment="after_finish",
        steps=STEPS,
    )
    workflow = workflow_get(workflow_id=workflow.pk, account_id=account.pk)
    assert workflow.name == "Welcome"
    assert workflow.status == "draft"
    assert (workflow.trigger_type, workflow.trigger_event, workflow.trigger_tag) == ("event", "tag.added", "trial")
    assert workflow.reenrollment == "after_finish"
    assert [(s.position, s.name, s.action_type) for s in workflow.steps.all()] == [
        (0, "Tag", "add_tag"),
        (1, "Email", "send_email"),
    ]
    assert workflow.current_version is None


def test_invalid_input_names_every_problem_and_stores_nothing(service, account):
    with pytest.raises(WorkflowValidationError) as info:
        service.create(
            account_id=account.pk,
            name="",
            trigger={"type": "event"},
            steps=[
                {"action_type": "add_tag", "config": {"tag": "ok"}},
                {"action_type": "webhook", "config": {"url": "not a url"}},
                {"action_type": "teleport"},
            ],
        )
    errors = info.value.as_dict()
    assert set(errors) == {"name", "trigger.event", "steps[1].config.url", "steps[2].action_type"}
    assert not Workflow.objects.exists()
    assert not WorkflowStep.objects.exists()


def test_a_refused_update_changes_nothing(service, account):
    workflow = service.create(account_id=account.pk, name="W", steps=STEPS)
    with pytest.raises(WorkflowValidationError) as info:
        service.update(workflow_id=workflow.pk, name="New name", steps=[{"action_type": "send_sms", "config": {}}])
    assert info.value.as_dict() == {"steps[0].config.body": ["is required"]}
    workflow.refresh_from_db()
    assert workflow.name == "W"
    assert [s.action_type for s in workflow.steps.order_by("position")] == ["add_tag", "send_email"]


def test_publish_freezes_versions_and_keeps_history(service, account):
    workflow = service.create(account_id=account.pk, name="W", steps=STEPS)
    v1 = service.publish(workflow_id=workflow.pk)
    workflow.refresh_from_db()
    assert workflow.status == "active"
    assert workflow.current_version == v1
    assert v1.number == 1
    assert [s["action_type"] for s in v1.steps] == ["add_tag", "send_email"]
    assert not has_unpublished_changes(workflow)

    service.update(workflow_id=workflow.pk, steps=[STEPS[1]])
    workflow.refresh_from_db()
    assert has_unpublished_changes(workflow)
    assert workflow.current_version == v1  # editing the draft changes nothing that runs

    v2 = service.publish(workflow_id=workflow.pk)
    assert v2.number == 2
    assert [s["action_type"] for s in v2.steps] == ["send_email"]
    v1.refresh_from_db()
    assert [s["action_type"] for s in v1.steps] == ["add_tag", "send_email"]  # immutable
    assert list(workflow_versions(workflow_id=workflow.pk).values_list("number", flat=True)) == [2, 1]

    assert service.publish(workflow_id=workflow.pk) == v2  # nothing changed: no new version
    assert WorkflowVersion.objects.filter(workflow=workflow).count() == 2


def test_publishing_needs_a_step(service, account):
    workflow = service.create(account_id=account.pk, name="Empty")
    with pytest.raises(WorkflowValidationError) as info:
        service.publish(workflow_id=workflow.pk)
    assert info.value.as_dict() == {"steps": ["a workflow needs at least one step to be published"]}
    workflow.refresh_from_db()
    assert workflow.status == "draft"
    assert not WorkflowVersion.objects.exists()


def test_status_moves(service, account):
    workflow = service.create(account_id=account.pk, name="W", steps=STEPS)
    with pytest.raises(IllegalWorkflowTransition, match="cannot activate a workflow that is draft"):
        service.activate(workflow_id=workflow.pk)
    with pytest.raises(IllegalWorkflowTransition):
        service.pause(workflow_id=workflow.pk)
    service.publish(workflow_id=workflow.pk)
    assert service.pause(workflow_id=workflow.pk).status == "paused"
    assert service.activate(workflow_id=workflow.pk).status == "active"
    assert service.archive(workflow_id=workflow.pk).status == "archived"
    with pytest.raises(IllegalWorkflowTransition, match="restore it first"):
        service.update(workflow_id=workflow.pk, name="x")
    with pytest.raises(IllegalWorkflowTransition):
        service.publish(workflow_id=workflow.pk)
    assert service.restore(workflow_id=workflow.pk).status == "draft"


def test_another_accounts_workflow_is_not_found(service, account, other_account):
    workflow = service.create(account_id=account.pk, name="W", steps=STEPS)
    with pytest.raises(WorkflowNotFound):
        service.publish(workflow_id=workflow.pk, account_id=other_account.pk)
    with pytest.raises(WorkflowNotFound):
        workflow_get(workflow_id=workflow.pk, account_id=other_account.pk)


@pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own
def test_run_selectors_are_scoped_by_account(account, other_account, contact):
    from tests.integration.workflows.support import make_workflow, run_due_jobs
    from workflows.application.errors import ExecutionNotFound
    from workflows.application.runs.operating import pause_run
    from workflows.application.runs.starting import start_run
    from workflows.application.selectors import execution_get, execution_list, execution_logs

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "a"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    found = execution_get(execution_id=run.pk, account_id=account.pk)
    assert found.status == "completed"
    assert [entry.outcome for entry in found.logs.all()] == ["succeeded"]
    assert list(execution_list(account_id=account.pk, status="completed")) == [found]
    assert not execution_list(account_id=other_account.pk).exists()
    assert [e.step_index for e in execution_logs(execution_id=str(run.pk), account_id=account.pk)] == [0]
    with pytest.raises(ExecutionNotFound):
        execution_get(execution_id=run.pk, account_id=other_account.pk)
    with pytest.raises(ExecutionNotFound):
        execution_get(execution_id="not-a-uuid")
    with pytest.raises(ExecutionNotFound):
        pause_run(execution_id=run.pk, account_id=other_account.pk)


def test_archiving_an_archived_workflow_changes_nothing(service, account):
    """Two API DELETEs racing both reach the service; the second must not fail with an illegal transition."""
    workflow = service.create(
        account_id=account.pk, name="W", steps=[{"action_type": "add_tag", "config": {"tag": "a"}}]
    )
    first = service.archive(workflow_id=workflow.pk)
    second = service.archive(workflow_id=workflow.pk, account_id=account.pk)
    assert first.status == second.status == "archived"
    assert second.updated_at == first.updated_at


def test_publish_draft_says_whether_this_publish_made_the_version(service, account):
    """Decided under the row lock, so of two identical publishes racing exactly one says it made the version."""
    workflow = service.create(
        account_id=account.pk, name="W", steps=[{"action_type": "add_tag", "config": {"tag": "a"}}]
    )
    first = service.publish_draft(workflow_id=workflow.pk)
    again = service.publish_draft(workflow_id=workflow.pk)
    assert (first.created, again.created) == (True, False)
    assert again.version.pk == first.version.pk
