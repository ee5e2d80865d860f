"""Use cases that own their transaction refuse to run inside someone else's (`atomic(durable=True)`).

Carrying out a step commits the run ACTIVE before the outside world is touched, and the dead-letter hook
sets a lock timeout for its own transaction: nested in a caller's transaction, neither would hold. An
operator's move commits its job's cancellation at once. Nesting one by mistake fails loudly instead.
"""

import pytest
from django.db import transaction

from tests.integration.workflows.support import make_workflow
from workflows.application.runs.operating import job_died, pause_run
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)  # a real outer transaction, not the test's own

TAG_STEP = {"action_type": "add_tag", "config": {"tag": "done"}}


def test_an_operator_s_move_inside_another_transaction_fails_loudly(account, contact):
    run = start_run(workflow_id=make_workflow(account, [TAG_STEP]).pk, contact_id=contact.pk).execution
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        pause_run(execution_id=run.pk)
    assert WorkflowExecution.objects.get(pk=run.pk).status == "queued"
    assert pause_run(execution_id=run.pk).status == "paused"  # on its own it goes through


def test_the_dead_letter_hook_inside_another_transaction_fails_loudly(account, contact):
    run = start_run(workflow_id=make_workflow(account, [TAG_STEP]).pk, contact_id=contact.pk).execution
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        job_died(execution_id=run.pk, job_id=run.next_job_id, handler="workflow_step", status="dead", error="x")
    assert WorkflowExecution.objects.get(pk=run.pk).status == "queued"
