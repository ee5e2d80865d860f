"""The workflow engine with the queue in its own database (JOBS_DATABASE): a step's transaction commits on
`default` (the run's move, what follows it through the outbox), and its job is completed on the queue's
database after that. A worker that dies in between runs the job again; the engine must do nothing then.
Skipped with one database (CI's split step sets JOBS_DATABASE_URL)."""

import datetime as dt

import pytest
from django.utils import timezone

from jobs.application import context as jobs_context
from jobs.application.context import context_for
from jobs.application.registry import get_handler
from jobs.infrastructure.models import Job, OutboxJob
from jobs.infrastructure.store import Finished, get_store
from tests.integration.workflows.support import TEST_WORKER, log_rows, make_workflow, move_outboxes, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.queue_apart,
]


def test_a_steps_job_run_again_after_its_transaction_committed_does_nothing(account, contact, monkeypatch):
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "first"}},
            {"action_type": "add_tag", "config": {"tag": "second"}},
        ],
    )
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    assert OutboxJob.objects.filter(pk=run.next_job_id).exists()  # start_run's transaction is on default
    assert move_outboxes() == 1

    store = get_store()
    (claimed,) = store.claim(TEST_WORKER, None, 1, 60)
    first_job = claimed.id
    context = context_for(claimed, store, TEST_WORKER)
    # The worker dies right after the step's transaction commits, before it completes the job on the queue.
    with monkeypatch.context() as died:
        died.setattr(jobs_context, "complete_after_commit", lambda alias, jobs: None)
        get_handler(claimed.handler)(claimed.payload, context)
    # The step's transaction committed on default: the run moved, the next step waits in the outbox ...
    run.refresh_from_db()
    assert run.current_step_index == 1
    assert OutboxJob.objects.filter(pk=run.next_job_id).exists()
    # ... and its own job is not completed.
    assert not context.completed_in_transaction
    assert Job.objects.get(pk=first_job).status == "running"

    # Its lease passes; another worker rescues the job and runs it again.
    Job.objects.filter(pk=first_job).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert [r[0] for r in store.rescue_expired()] == [first_job]
    (again,) = store.claim("another-worker", None, 1, 60)
    assert again.id == first_job
    assert again.attempt_number == 2
    rerun = context_for(again, store, "another-worker")
    get_handler(again.handler)(again.payload, rerun)  # the run names another job: nothing happens
    store.complete("another-worker", [Finished(again.id, again.attempt_number, rerun.started, rerun.started)])
    run.refresh_from_db()
    assert run.current_step_index == 1
    assert OutboxJob.objects.count() == 1  # still only the second step's job

    assert run_due_jobs() == 1  # the second step (moved from the outbox first)
    run.refresh_from_db()
    assert run.status == "completed"
    assert log_rows(run) == [(0, "add_tag", 1, "succeeded"), (1, "add_tag", 1, "succeeded")]
    assert Job.objects.filter(status="completed").count() == 2
    assert not WorkflowExecution.objects.exclude(status="completed").exists()
