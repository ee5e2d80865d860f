"""Which webhook-id a step's delivery carries (Standard Webhooks: the id names the message).

A new attempt of the same message keeps its id, so a receiver that deduplicates by id drops a repeat: the
engine's own retries of a step. An operator's retry of a FAILED run asks for a new delivery: a new message,
with a new id, that such a receiver must not drop.
"""

import pytest

from tests.integration.workflows.support import make_due, make_workflow, run_due_jobs
from workflows.application.runs.operating import retry_run
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def ids_received(webhook_server) -> list[str]:
    return [r.headers["webhook-id"] for r in webhook_server.received]


def test_the_engines_retries_keep_the_id_an_operators_retry_gets_a_new_one(account, contact, webhook_server):
    # Round 1: a passing failure, retried by the engine, then a refusal that fails the run.
    # Round 2 (operator's retry): refused again. Round 3 (another retry): delivered.
    webhook_server.answers = [(503, {}, "down"), (400, {}, "no"), (400, {}, "no"), (200, {}, "{}")]
    steps = [
        {"action_type": "webhook", "config": {"url": webhook_server.url}},
        {"action_type": "webhook", "config": {"url": webhook_server.url + "/after"}},
    ]
    workflow = make_workflow(account, steps)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    make_due(WorkflowExecution.objects.get(pk=run.pk).next_job_id)
    run_due_jobs()
    assert WorkflowExecution.objects.get(pk=run.pk).status == "failed"
    for _round in range(2):
        retry_run(execution_id=run.pk)
        run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.manual_retries) == ("completed", 2)

    first = f"run_{run.pk.hex}_step_0"
    assert ids_received(webhook_server) == [
        first,  # 503
        first,  # the engine's retry of the same message: 400, the run fails
        f"{first}_retry_1",  # the operator's retry: a new message
        f"{first}_retry_2",  # and another: delivered
        f"run_{run.pk.hex}_step_1_retry_2",  # the next step, first sent in this round
    ]


def test_a_run_never_retried_by_an_operator_keeps_the_id_it_always_had(account, contact, webhook_server):
    """Ids already sent stay what they were: a receiver that saw run_<id>_step_0 still drops its repeats."""
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": webhook_server.url}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    assert ids_received(webhook_server) == [f"run_{run.pk.hex}_step_0"]
