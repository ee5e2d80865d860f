"""The data migration to the graph of steps: drafts and versions get keys, and a run in flight finishes.

The schema goes back to before 0006, an old-shape workflow (steps without keys) is published and a run of
it left waiting at its second step with its job queued, then the migrations run forward and a worker
finishes the run: on the same version, through the same steps, its log rows naming each step's key.
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from jobs.application.queue import enqueue
from tests.factories import ContactFactory
from tests.integration.workflows.support import run_due_jobs
from workflows.application.runs.moves import STEP_HANDLER
from workflows.infrastructure.models import ExecutionLog, Workflow, WorkflowExecution, WorkflowStep, WorkflowVersion

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("workflows", "0005_workflow_track_email_engagement")]
OLD_STEPS = [
    {"name": "First", "action_type": "add_tag", "config": {"tag": "one"}},
    {"name": "", "action_type": "add_tag", "config": {"tag": "two"}},
    {"name": "Last", "action_type": "add_tag", "config": {"tag": "three"}},
]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def _latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def test_an_old_shape_run_in_flight_finishes_across_the_migration(account):
    contact = ContactFactory(account=account)
    latest = _latest()
    _migrate(BEFORE)
    try:
        old = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        OldWorkflow = old.get_model("workflows", "Workflow")
        OldStep = old.get_model("workflows", "WorkflowStep")
        OldVersion = old.get_model("workflows", "WorkflowVersion")
        OldRun = old.get_model("workflows", "WorkflowExecution")
        OldLog = old.get_model("workflows", "ExecutionLog")
        workflow = OldWorkflow.objects.create(account_id=account.pk, name="Old", status="active", reenrollment="always")
        for position, step in enumerate(OLD_STEPS):
            OldStep.objects.create(workflow=workflow, position=position, **step)
        version = OldVersion.objects.create(
            workflow=workflow, number=1, trigger_type="manual", reenrollment="always", steps=OLD_STEPS
        )
        OldWorkflow.objects.filter(pk=workflow.pk).update(current_version=version)
        run = OldRun.objects.create(
            account_id=account.pk,
            workflow=workflow,
            version=version,
            contact_id=contact.pk,
            status="queued",
            current_step_index=1,
            step_count=3,
            context={"event": "", "trigger": {}, "steps": [{"tag": "one", "added": True}]},
        )
        OldLog.objects.create(
            execution=run,
            step_index=0,
            step_name="First",
            action_type="add_tag",
            attempt_number=1,
            outcome="succeeded",
            started_at="2026-12-01T00:00:00Z",
        )
        job = enqueue(
            STEP_HANDLER,
            {"execution_id": str(run.pk), "step_index": 1, "version_id": str(version.pk)},
            account=account.pk,
        )
        OldRun.objects.filter(pk=run.pk).update(next_job_id=job.id)
    finally:
        _migrate(latest)

    # Drafts and versions have keys; the run knows its step by key; the old log row names its step.
    assert list(WorkflowStep.objects.filter(workflow_id=workflow.pk).values_list("key", "next_key")) == [
        ("step_1", ""),
        ("step_2", ""),
        ("step_3", ""),
    ]
    assert [s["key"] for s in WorkflowVersion.objects.get(pk=version.pk).steps] == ["step_1", "step_2", "step_3"]
    assert WorkflowExecution.objects.get(pk=run.pk).current_step_key == "step_2"
    assert ExecutionLog.objects.get(execution_id=run.pk).step_key == "step_1"

    assert run_due_jobs() == 2
    finished = WorkflowExecution.objects.get(pk=run.pk)
    assert finished.status == "completed"
    assert finished.version_id == version.pk
    assert finished.current_step_key == ""
    contact.refresh_from_db()
    assert set(contact.tags) == {"two", "three"}  # the steps after the migration ran; the first had run before
    rows = list(ExecutionLog.objects.filter(execution_id=run.pk).order_by("id").values_list("step_index", "step_key"))
    assert rows == [(0, "step_1"), (1, "step_2"), (2, "step_3")]
    # A draft of the old shape publishes unchanged: the same steps make no new version.
    from workflows.application.workflows import WorkflowService

    assert WorkflowService().publish_draft(workflow_id=workflow.pk).created is False
    assert Workflow.objects.get(pk=workflow.pk).current_version_id == version.pk
