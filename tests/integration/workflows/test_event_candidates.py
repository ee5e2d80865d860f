"""Which workflows an event starts: one candidate's trouble never breaks the contact change or the others."""

from __future__ import annotations

import pytest

from contacts.infrastructure.models import Contact
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.starting import record_event, start_run
from workflows.application.trigger_cache import trigger_cache
from workflows.infrastructure.models import Workflow, WorkflowExecution, WorkflowVersion

pytestmark = pytest.mark.django_db(transaction=True)

ON_VIP = {"type": "event", "event": "tag.added", "tag": "vip"}


def follower(account, *, name: str, tag: str = "welcomed", trigger: dict | None = None) -> Workflow:
    return make_workflow(
        account, [{"action_type": "add_tag", "config": {"tag": tag}}], trigger=trigger or ON_VIP, name=name
    )


def corrupt(workflow: Workflow, steps: list) -> None:
    """A published version as a rule changed after publishing would leave it (the row as stored)."""
    assert workflow.current_version_id is not None
    WorkflowVersion.objects.filter(pk=workflow.current_version_id).update(steps=steps)


def test_a_workflow_whose_version_does_not_load_is_skipped_and_the_step_goes_on(account, contact):
    broken = follower(account, name="Broken")
    corrupt(broken, [{"action_type": "teleport", "config": {}}])
    good = follower(account, name="Good", tag="welcomed")
    tagger = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "vip"}}], name="Tagger")
    run = start_run(workflow_id=tagger.pk, contact_id=contact.pk).execution
    run_due_jobs(limit=1)
    run.refresh_from_db()
    assert run.status == "completed"  # the tag step's transaction was not doomed by the broken candidate
    assert "vip" in Contact.objects.get(pk=contact.pk).tags
    assert WorkflowExecution.objects.filter(workflow=good, contact=contact).count() == 1
    assert not WorkflowExecution.objects.filter(workflow=broken).exists()


def test_record_event_reports_the_candidate_that_could_not_start(account, contact):
    broken = follower(account, name="Broken")
    corrupt(broken, "not a list")
    good = follower(account, name="Good")
    outcome = record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"})
    assert [run.workflow_id for run in outcome.started] == [good.pk]
    assert [(s.workflow_id, s.reason) for s in outcome.skipped] == [
        (broken.pk, "the workflow could not be started (see the logs)")
    ]


def test_a_published_version_is_not_validated_again_when_loaded(account, contact):
    """Validation happens at save and publish; a rule tightened later must not stop its runs from starting."""
    workflow = follower(account, name="Old")
    corrupt(
        workflow,
        [
            {"action_type": "add_tag", "config": {"tag": "{% load evil %}"}},
            {"action_type": "update_contact", "config": {"fields": {"retired_field": "x"}}},
        ],
    )
    outcome = record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"})
    assert [run.workflow_id for run in outcome.started] == [workflow.pk]
    assert outcome.skipped == []


def test_a_workflow_paused_behind_a_stale_cache_is_not_started(account, contact, trusted_cache):
    workflow = follower(account, name="Follower")
    assert len(record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"}).started) == 1
    Workflow.objects.filter(pk=workflow.pk).update(status="paused")  # and the notification never came
    outcome = record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"})
    assert outcome.started == []
    assert WorkflowExecution.objects.filter(workflow=workflow).count() == 1
    assert trigger_cache.get(account.pk, ("tag.added", "vip"))[0] is None  # the stale answer is dropped


def test_deleting_a_workflow_makes_workers_forget_its_trigger(account, contact, trusted_cache):
    workflow = follower(
        account, name="Follower", trigger={**ON_VIP, "filter": [{"field": "tags", "op": "contains", "value": "nope"}]}
    )
    record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"})
    assert trigger_cache.get(account.pk, ("tag.added", "vip"))[0] == [(workflow.pk, workflow.current_version_id)]
    Workflow.objects.get(pk=workflow.pk).delete()  # as the admin's delete does (a workflow without runs)
    assert trigger_cache.get(account.pk, ("tag.added", "vip"))[0] is None
    outcome = record_event(account=account.pk, contact=contact.pk, name="tag.added", data={"tag": "vip"})
    assert (outcome.started, outcome.skipped) == ([], [])
