"""Many runs sharing a few contacts, carried out in batches by two real `runworker` processes."""

from collections import Counter

import pytest

from contacts.infrastructure.models import Contact
from jobs.infrastructure.models import Job
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import log_rows, make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_runs
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

WORKER_ENV = {"JOB_POLL_INTERVAL": "0.2", "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "INFO"}
CONTACTS = 4
ROUNDS = 10  # runs per contact


def test_many_runs_of_a_few_contacts_all_complete_once_without_deadlock(start_worker, webhook_server):
    account = AccountFactory()
    contacts = ContactFactory.create_batch(CONTACTS, account=account)
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "a"}},
            {"action_type": "update_contact", "config": {"custom_fields": {"n": "{{ trigger.n }}"}}},
            {"action_type": "webhook", "config": {"url": webhook_server.url, "body": {"n": "{{ trigger.n }}"}}},
            {"action_type": "add_tag", "config": {"tag": "b"}},
        ],
    )
    run_ids = []
    for n in range(ROUNDS):  # every contact in every round: many runs of one contact are due at once
        started = start_runs(workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts], trigger_data={"n": n})
        run_ids += started.execution_ids
    workers = [start_worker(**WORKER_ENV) for _ in range(2)]
    runs = WorkflowExecution.objects.filter(pk__in=run_ids)

    def all_done() -> bool:
        return runs.filter(status__in=["completed", "failed", "cancelled"]).count() == len(run_ids)

    wait_until(all_done, 90, f"{len(run_ids)} runs to finish")
    assert Counter(runs.values_list("status", flat=True)) == {"completed": CONTACTS * ROUNDS}
    for run in runs:  # one attempt per step, each logged once
        assert log_rows(run) == [
            (0, "add_tag", 1, "succeeded"),
            (1, "update_contact", 1, "succeeded"),
            (2, "webhook", 1, "succeeded"),
            (3, "add_tag", 1, "succeeded"),
        ]
    assert len(webhook_server.received) == CONTACTS * ROUNDS  # each run's webhook once
    assert Counter(str(r.body["n"]) for r in webhook_server.received) == {str(n): CONTACTS for n in range(ROUNDS)}
    for contact in Contact.objects.filter(pk__in=[c.pk for c in contacts]):
        assert sorted(contact.tags) == ["a", "b"]
        assert contact.custom_fields["n"] in {str(n) for n in range(ROUNDS)}
    assert set(Job.objects.values_list("status", "attempt_number")) == {("completed", 1)}
    # Steps of different runs went through batches: a batch reads its clock once for all its runs.
    shared = [
        count for count in Counter(ExecutionLog.objects.values_list("step_index", "started_at")).values() if count > 1
    ]
    assert shared, "no step ever ran in a batch"
    for worker in workers:
        output = worker.output()
        assert "deadlock" not in output.lower()
        assert "batch handler" not in output  # it never failed and fell back to one by one
        assert "Traceback" not in output
