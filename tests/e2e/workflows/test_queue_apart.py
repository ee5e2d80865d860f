"""Real `runworker` processes with the queue in its own database (JOBS_DATABASE): jobs queued inside
transactions on `default` reach the queue through the outbox, and multi-step workflows run every step once.
Skipped unless JOBS_DATABASE_URL is set (CI's split step)."""

from collections import Counter

import pytest
from django.db import DEFAULT_DB_ALIAS, transaction

from jobs.application.queue import JobSpec, enqueue_many
from jobs.infrastructure.models import Job, OutboxJob
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.queue_apart, pytest.mark.django_db(transaction=True)]

RUNS = 30
JOBS = 300


def test_workers_drain_outbox_jobs_and_run_every_step_of_every_run_once(start_worker):
    account = AccountFactory(max_concurrent_executions=RUNS + 10, max_concurrent_jobs=20)
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "one"}},
            {"action_type": "add_tag", "config": {"tag": "two"}},
            {"action_type": "add_tag", "config": {"tag": "three"}},
        ],
    )
    contacts = [ContactFactory(account=account) for _ in range(RUNS)]
    for _ in range(2):
        start_worker("--concurrency", "2", JOB_POLL_INTERVAL="0.5", LOG_LEVEL="INFO")
    with transaction.atomic():  # on default: through its outbox, queued at this commit
        noop_ids = enqueue_many([JobSpec("noop", {"n": n}, account=account) for n in range(JOBS)])
    runs = []
    for contact in contacts:
        runs.append(start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution.pk)

    def finished() -> bool:
        return WorkflowExecution.objects.filter(pk__in=runs, status="completed").count() == RUNS and (
            Job.objects.filter(pk__in=noop_ids, status="completed").count() == JOBS
        )

    wait_until(finished, 90, "every run and every job to finish")
    steps = Counter(ExecutionLog.objects.filter(execution_id__in=runs).values_list("execution_id", "step_index"))
    assert len(steps) == RUNS * 3
    assert set(steps.values()) == {1}  # each step of each run carried out once
    assert not OutboxJob.objects.using(DEFAULT_DB_ALIAS).exists()
    assert not Job.objects.exclude(status="completed").exists()
    assert Job.objects.count() == JOBS + RUNS * 3  # no job queued twice by a repeated move
