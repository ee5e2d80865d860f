"""What a run decided, on its page and in the workflow's statistics: a branch and a split run for real
(jobs run as a worker runs them), then the timeline names each step by key and says which branch was taken
and why, which path the split chose, and the statistics count which way the runs went."""

import re

import pytest
from django.urls import reverse

from contacts.application.services import contact_create
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)  # it runs jobs: a claim commits on its own

STEPS = [
    {
        "key": "check",
        "name": "VIP?",
        "action_type": "branch",
        "config": {
            "branches": [
                {"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "ab"}
            ],
            "default": "done",
        },
    },
    {
        "key": "ab",
        "name": "A/B",
        "action_type": "split",
        "config": {
            "paths": [{"name": "A", "weight": 50, "next": "tag_a"}, {"name": "B", "weight": 50, "next": "tag_a"}]
        },
    },
    {"key": "tag_a", "name": "Tag A", "action_type": "add_tag", "config": {"tag": "a"}, "next": "done"},
    {"key": "done", "name": "Finish", "action_type": "end", "config": {}},
]


def test_the_run_page_and_the_statistics_say_which_way_runs_went(admin_client, account):
    workflow = make_workflow(account, STEPS)
    vip = contact_create(account_id=account.pk, email="vip@example.com", tags=["vip"])
    other = contact_create(account_id=account.pk, email="other@example.com")
    runs = [start_run(workflow_id=workflow.pk, contact_id=c.pk).execution for c in (vip, other)]
    run_due_jobs()
    page = admin_client.get(reverse("admin:workflows_workflowexecution_change", args=[runs[0].pk])).content.decode()
    assert "completed" in page
    assert '<code class="relay-t-key">ab</code>' in page  # steps named by key
    assert "↳ Took the branch “VIP” (tags = [&quot;vip&quot;]) → “ab”" in page
    assert re.search(r"Split: bucket \d+ of 100, path “[AB]” → “tag_a”", page)
    assert "↳ Ended the run here (ended by step)" in page
    page = admin_client.get(reverse("admin:workflows_workflowexecution_change", args=[runs[1].pk])).content.decode()
    assert "↳ No branch&#x27;s conditions held (tags = []): took the default → “done”" in page
    assert page.count('data-step-state="not reached"') == 2  # the split and the tag: not on its path
    stats = admin_client.get(reverse("admin:workflows_workflow_stats", args=[workflow.pk])).content.decode()
    assert "1 took “VIP”<br>1 took the default (no branch held)" in stats
    assert re.search(r"1 took path “[AB]”", stats)
    assert '<td data-testid="met-goal">0</td>' in stats


def test_the_statistics_count_runs_that_met_a_goal_whether_it_ended_them_or_moved_them_on(admin_client, account):
    workflow = make_workflow(account, [{"key": "tag", "action_type": "add_tag", "config": {"tag": "x"}}])
    contacts = [contact_create(account_id=account.pk, email=f"c{n}@example.com") for n in range(3)]
    runs = [start_run(workflow_id=workflow.pk, contact_id=c.pk).execution for c in contacts]
    run_due_jobs()
    # What the goals' use case records (#11): the reason of a run a goal ended, the log row of one it moved on.
    WorkflowExecution.objects.filter(pk=runs[0].pk).update(end_reason="goal met: Bought")
    log = ExecutionLog.objects.filter(execution=runs[1]).first()
    ExecutionLog.objects.filter(pk=log.pk).update(decision={"kind": "goal", "goal": "Bought", "next": "tag"})
    stats = admin_client.get(reverse("admin:workflows_workflow_stats", args=[workflow.pk])).content.decode()
    assert stats.count('<td data-testid="met-goal">2</td>') == 2  # the last 24 hours and the last 30 days


def test_a_run_waiting_for_an_event_says_for_what_and_the_event_and_the_goal_show_on_its_timeline(
    admin_client, account
):
    from contacts.application.services import contact_add_tag
    from workflows.application.workflows import WorkflowService

    steps = [
        {
            "key": "wait_vip",
            "name": "Wait to be VIP",
            "action_type": "wait_for_event",
            "config": {"event": "tag.added", "match": {"tag": "vip"}, "timeout": "2d", "on_timeout": "$end"},
            "next": "tag_it",
        },
        {"key": "tag_it", "action_type": "add_tag", "config": {"tag": "welcomed"}},
        {"key": "long_wait", "action_type": "wait", "config": {"duration": "7d"}},
        {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
    ]
    goal = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}
    service = WorkflowService()
    workflow = service.create(account_id=account.pk, name="Nurture", steps=steps, goals=[goal])
    service.publish(workflow_id=workflow.pk)
    contact = contact_create(account_id=account.pk, email="ada@example.com")
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    run_due_jobs()
    url = reverse("admin:workflows_workflowexecution_change", args=[run.pk])
    page = admin_client.get(url).content.decode()
    assert "A tag is added to the contact (tag &quot;vip&quot;), until " in page
    contact_add_tag(contact_id=contact.pk, tag="vip")
    run_due_jobs()
    page = admin_client.get(url).content.decode()
    assert re.search(r"↳ The event it waited for happened at \d+ \w+ \d{4}, [\d:]+ UTC \(event \w+\)", page)
    assert "waiting" in page  # now in the seven days' wait
    contact_add_tag(contact_id=contact.pk, tag="customer")
    run_due_jobs()
    page = admin_client.get(url).content.decode()
    assert 'data-testid="end-reason">goal met: Bought<' in page
    assert "↳ Goal met: “Bought”: the run ended" in page
    stats = admin_client.get(reverse("admin:workflows_workflow_stats", args=[workflow.pk])).content.decode()
    assert stats.count('<td data-testid="met-goal">1</td>') == 2
