"""The engine moves by `next`: jumps, branches, splits and end steps, each decision logged with its values.

Jobs run in this thread through `run_due_jobs`, exactly as a worker runs them; both databases.
"""

import pytest

from contacts.infrastructure.models import Contact
from tests.factories import ContactFactory
from tests.integration.workflows.support import end_wait_now, make_workflow, run_due_jobs
from workflows.application.runs.operating import cancel_run, pause_run, resume_run, retry_run
from workflows.application.runs.starting import start_run
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.execution import run_path
from workflows.infrastructure.models import ExecutionLog, Workflow, WorkflowExecution, WorkflowStep
from workflows.steps.split.config import split_bucket

pytestmark = pytest.mark.django_db(transaction=True)


def tag(key, value, **extra):
    return {"key": key, "action_type": "add_tag", "config": {"tag": value}, **extra}


def start(workflow, contact, **kwargs) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk, **kwargs).execution


def finish(run) -> WorkflowExecution:
    run_due_jobs()
    return WorkflowExecution.objects.get(pk=run.pk)


def logged(run) -> list[tuple]:
    return list(
        ExecutionLog.objects.filter(execution=run).order_by("id").values_list("step_key", "outcome", "decision")
    )


def path_of(run) -> list[str]:
    return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


def tags_of(contact) -> set[str]:
    return set(Contact.objects.get(pk=contact.pk).tags)


BRANCH = {
    "key": "check",
    "action_type": "branch",
    "config": {
        "branches": [
            {"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "engaged"},
            {
                "name": "Pro",
                "conditions": [{"field": "trigger.plan", "op": "in", "value": ["pro", "team"]}],
                "next": "pro",
            },
        ],
        "default": "cold",
    },
}
BRANCHING = [
    BRANCH,
    tag("engaged", "engaged", next="$end"),
    tag("pro", "pro_path", next="$end"),
    tag("cold", "cold"),
]


def test_next_jumps_and_the_path_is_recorded(account):
    contact = ContactFactory(account=account)
    workflow = make_workflow(
        account, [tag("a", "one", next="c"), tag("b", "two", next="$end"), tag("c", "three", next="b")]
    )
    run = finish(start(workflow, contact))
    assert run.status == "completed"
    assert path_of(run) == ["a", "c", "b"]
    assert run.current_step_key == ""
    assert [row[0] for row in logged(run)] == ["a", "c", "b"]
    assert tags_of(contact) == {"one", "two", "three"}


@pytest.mark.parametrize(
    ("tags", "data", "taken", "expected"),
    [
        (["vip"], {}, "VIP", "engaged"),
        ([], {"plan": "PRO"}, "Pro", "pro_path"),
        ([], {"plan": "free"}, None, "cold"),
    ],
)
def test_a_branch_takes_the_first_branch_that_holds_and_logs_why(account, tags, data, taken, expected):
    contact = ContactFactory(account=account, tags=tags)
    workflow = make_workflow(account, BRANCHING)
    run = finish(start(workflow, contact, trigger_data=data))
    assert run.status == "completed"
    assert expected in tags_of(contact)
    assert {"engaged", "pro_path", "cold"} & tags_of(contact) == {expected}
    key, outcome, decision = logged(run)[0]
    assert (key, outcome) == ("check", "succeeded")
    assert decision["kind"] == "branch"
    assert decision["branch"] == taken
    assert decision["default"] is (taken is None)
    assert decision["next"] == {"engaged": "engaged", "pro_path": "pro", "cold": "cold"}[expected]
    assert decision["values"]["tags"] == tags
    if taken != "VIP":
        assert decision["values"]["trigger.plan"] == data["plan"]
    assert path_of(run) == ["check", decision["next"]]


def test_a_branch_reads_an_earlier_steps_result(account):
    contact = ContactFactory(account=account)
    steps = [
        {"key": "first", "action_type": "add_tag", "config": {"tag": "seen"}},
        {
            "key": "check",
            "action_type": "branch",
            "config": {
                "branches": [
                    {
                        "name": "Added",
                        "conditions": [{"field": "steps.first.added", "op": "equals", "value": True}],
                        "next": "yes",
                    }
                ],
                "default": "$end",
            },
        },
        tag("yes", "branch_read_it"),
    ]
    run = finish(start(make_workflow(account, steps), contact))
    assert run.status == "completed"
    assert "branch_read_it" in tags_of(contact)
    assert logged(run)[1][2]["values"] == {"steps.first.added": True}


def test_a_split_is_deterministic_and_logged(account):
    contact = ContactFactory(account=account)
    split = {
        "key": "ab",
        "action_type": "split",
        "config": {"paths": [{"name": "A", "weight": 50, "next": "a"}, {"name": "B", "weight": 50, "next": "b"}]},
    }
    workflow = make_workflow(account, [split, tag("a", "path_a", next="$end"), tag("b", "path_b")])
    run = finish(start(workflow, contact))
    bucket = split_bucket(run.pk, "ab")
    path = "A" if bucket < 50 else "B"
    assert logged(run)[0][2] == {"kind": "split", "bucket": bucket, "path": path, "next": path.lower()}
    assert f"path_{path.lower()}" in tags_of(contact)
    assert path_of(run) == ["ab", path.lower()]


def test_an_end_step_completes_the_run_at_once(account):
    contact = ContactFactory(account=account)
    # z is reached only when the branch does not end the run first
    check = {
        "key": "check",
        "action_type": "branch",
        "config": {
            "branches": [{"name": "Stop", "conditions": [{"field": "email", "op": "is_set"}], "next": "stop"}],
            "default": "z",
        },
    }
    workflow = make_workflow(
        account, [tag("a", "one"), check, {"key": "stop", "action_type": "end", "config": {}}, tag("z", "never")]
    )
    run = finish(start(workflow, contact))
    assert run.status == "completed"
    assert run.end_reason == "ended by step"
    assert logged(run)[-1][0] == "stop"
    assert logged(run)[-1][2] == {"kind": "end"}
    assert "never" not in tags_of(contact)


def test_pause_and_resume_at_a_branch_after_a_wait(account):
    contact = ContactFactory(account=account, tags=["vip"])
    steps = [{"key": "w", "action_type": "wait", "config": {"duration": "1h"}, "next": "check"}, *BRANCHING]
    run = start(make_workflow(account, steps), contact)
    run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.current_step_key) == ("waiting", "check")
    pause_run(execution_id=run.pk)
    end_wait_now(run.pk)
    resume_run(execution_id=run.pk)
    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["w", "check", "engaged"]


def test_a_branch_naming_a_missing_step_stores_nothing(account):
    before = (Workflow.objects.count(), WorkflowStep.objects.count())
    bad = [dict(BRANCH, config=dict(BRANCH["config"], default="nowhere")), *BRANCHING[1:]]
    with pytest.raises(WorkflowValidationError) as info:
        WorkflowService().create(account_id=account.pk, name="Bad", steps=bad)
    assert info.value.as_dict() == {"steps[0].config.default": ["names no step of this workflow: 'nowhere'"]}
    assert (Workflow.objects.count(), WorkflowStep.objects.count()) == before


def test_a_split_summing_to_99_stores_nothing_on_update(account):
    workflow = make_workflow(account, [tag("a", "one")], publish=False)
    split = {
        "key": "ab",
        "action_type": "split",
        "config": {"paths": [{"name": "A", "weight": 50, "next": "$end"}, {"name": "B", "weight": 49, "next": "$end"}]},
    }
    with pytest.raises(WorkflowValidationError) as info:
        WorkflowService().update(workflow_id=workflow.pk, steps=[split])
    assert info.value.as_dict() == {"steps[0].config.paths": ["the weights must sum to 100 (they sum to 99)"]}
    assert list(WorkflowStep.objects.filter(workflow=workflow).values_list("key", "action_type")) == [("a", "add_tag")]


def test_keys_and_next_are_stored_and_given_back(account):
    workflow = make_workflow(account, [tag("a", "one", next="c"), tag("c", "three")])
    assert [s.as_dict() for s in WorkflowStep.objects.filter(workflow=workflow)] == [
        {"key": "a", "name": "", "action_type": "add_tag", "config": {"tag": "one"}, "next": "c"},
        {"key": "c", "name": "", "action_type": "add_tag", "config": {"tag": "three"}},
    ]
    workflow.refresh_from_db()
    assert workflow.current_version.steps[0]["next"] == "c"


def test_a_branch_reads_a_webhooks_status_and_json_answer(account, webhook_server):
    webhook_server.answers = [(201, {"Content-Type": "application/json"}, '{"plan": "Team", "seats": 12}')]
    contact = ContactFactory(account=account)
    steps = [
        {"key": "call_api", "action_type": "webhook", "config": {"url": webhook_server.url + "/plan"}},
        {
            "key": "check",
            "action_type": "branch",
            "config": {
                "branches": [
                    {
                        "name": "Big team",
                        "conditions": [
                            {"field": "steps.call_api.status_code", "op": "less_than", "value": 300},
                            {"field": "steps.call_api.body.plan", "op": "equals", "value": "team"},
                            {"field": "steps.call_api.body.seats", "op": "greater_or_equal", "value": 10},
                        ],
                        "next": "big",
                    }
                ],
                "default": "$end",
            },
        },
        tag("big", "big_team"),
    ]
    run = finish(start(make_workflow(account, steps), contact))
    assert run.status == "completed"
    assert "big_team" in tags_of(contact)
    assert logged(run)[1][2]["values"] == {
        "steps.call_api.status_code": 201,
        "steps.call_api.body.plan": "Team",
        "steps.call_api.body.seats": 12,
    }


def test_a_loop_through_a_wait_sends_a_new_webhook_message_per_visit(account, webhook_server):
    contact = ContactFactory(account=account)
    steps = [
        {"key": "ping", "action_type": "webhook", "config": {"url": webhook_server.url + "/ping"}},
        tag("count", "pinged"),
        {
            "key": "again",
            "action_type": "branch",
            "config": {
                "branches": [
                    {
                        "name": "Once more",
                        "conditions": [{"field": "tags", "op": "not_contains", "value": "twice"}],
                        "next": "mark",
                    }
                ],
                "default": "$end",
            },
        },
        tag("mark", "twice", next="pause"),
        {"key": "pause", "action_type": "wait", "config": {"duration": 3600}, "next": "ping"},
    ]
    run = start(make_workflow(account, steps), contact)
    run_due_jobs()
    end_wait_now(run.pk)
    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["ping", "count", "again", "mark", "pause", "ping", "count", "again"]
    ids = [received.headers["webhook-id"] for received in webhook_server.received]
    assert ids == [f"run_{run.pk.hex}_step_0", f"run_{run.pk.hex}_step_0_visit_2"]


def test_cancel_at_a_queued_branch_and_retry_after_a_failure_before_one(account, webhook_server, settings):
    settings.WORKFLOW_STEP_MAX_ATTEMPTS = 1
    webhook_server.answers = [(400, {}, "no"), (200, {}, "{}")]
    contact = ContactFactory(account=account, tags=["vip"])
    steps = [{"key": "hook", "action_type": "webhook", "config": {"url": webhook_server.url + "/x"}}, *BRANCHING]
    workflow = make_workflow(account, steps)
    run = finish(start(workflow, contact))
    assert (run.status, run.current_step_key) == ("failed", "hook")
    retry_run(execution_id=run.pk)
    run = finish(run)
    assert run.status == "completed"
    assert path_of(run) == ["hook", "check", "engaged"]
    other = start(make_workflow(account, BRANCHING, name="Second"), contact)
    cancel_run(execution_id=other.pk)
    assert finish(other).status == "cancelled"
    assert logged(other) == []
