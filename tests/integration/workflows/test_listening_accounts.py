"""Whether an account's events look for waiting runs and goals: exact, whatever a worker's cache holds.

A worker's trigger cache is told of a publish by a notification; one that missed it (a half-open listener
connection) used to keep "this account has no waits or goals" for up to WORKFLOW_TRIGGER_CACHE_MAX_AGE, and an
event then passed a waiting run by. Both databases; jobs run in this thread.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from contacts.application.services import contact_add_tag
from contacts.infrastructure.models import Contact
from tests.integration.workflows.support import make_workflow, run_due_jobs, waiting_workflow
from workflows.application.runs.goals import account_has_goals, account_listens, listening_read_once
from workflows.application.runs.starting import start_run
from workflows.application.trigger_cache import trigger_cache
from workflows.application.workflows import WorkflowService
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)

LISTENS, GOALS = ("$listens", None), ("$goals", None)


def stale_no(account_id: int) -> None:
    """What a worker that missed the publish's notification held: "no waits, no goals" for the account."""
    _, generation = trigger_cache.get(account_id, LISTENS)
    trigger_cache.put(account_id, LISTENS, [], generation)
    trigger_cache.put(account_id, GOALS, [], generation)


def test_an_event_after_the_first_listening_publish_is_heard_whatever_the_cache_says(trusted_cache, account, contact):
    make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "plain"}}], name="Plain")
    assert not account_listens(account.pk)
    run = start_run(workflow_id=waiting_workflow(account).pk, contact_id=contact.pk).execution
    run_due_jobs()
    assert WorkflowExecution.objects.get(pk=run.pk).status == "waiting"
    stale_no(account.pk)

    contact_add_tag(contact_id=contact.pk, tag="gold")
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    assert "heard" in Contact.objects.get(pk=contact.pk).tags
    assert trigger_cache.get(account.pk, LISTENS)[0]  # the "yes" is kept: it stays true


def test_goals_published_after_waits_are_met_whatever_the_cache_says(trusted_cache, account, contact):
    waiting_workflow(account)
    assert account_listens(account.pk)
    assert not account_has_goals(account.pk)
    service = WorkflowService()
    gold = {"name": "Gold", "conditions": [{"field": "tags", "op": "contains", "value": "gold"}]}
    workflow = service.create(
        account_id=account.pk, name="Goal", steps=[{"action_type": "wait", "config": {"duration": "1d"}}], goals=[gold]
    )
    service.publish(workflow_id=workflow.pk)
    stale_no(account.pk)  # as a worker that missed this publish's notification
    assert account_has_goals(account.pk)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    stale_no(account.pk)
    contact_add_tag(contact_id=contact.pk, tag="gold")
    run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.end_reason) == ("completed", "goal met: Gold")


def test_a_batch_reads_the_answer_once_per_account(trusted_cache, account, other_account):
    with CaptureQueriesContext(connection) as queries, listening_read_once():
        for _ in range(3):
            assert not account_listens(account.pk)
            assert not account_listens(other_account.pk)
    assert len(queries.captured_queries) == 2
    with CaptureQueriesContext(connection) as queries:
        assert not account_listens(account.pk)  # outside a batch: read each time, never cached as "no"
        assert not account_listens(account.pk)
    assert len(queries.captured_queries) == 2
