"""kill -9 of workers while runs go through a branch and a split: every run continues on the same path.

Real `runworker` processes on PostgreSQL carry 600 runs of a graph (tag, branch on the contact's tags, a
50/50 split, one tag per path). Two workers are killed with SIGKILL while the runs are in flight (each
mid-job: the branch's or split's transaction, or the tag step's, dies with it) and replaced; the killed
workers' jobs are rescued after their lease. Every run must complete on the path its data and its run id
choose (the branch by the contact's tags, the split by a hash of the run id), each step of that path
logged succeeded exactly once, and no run may have a log row of the other path.
"""

import time

import pytest

from jobs.infrastructure.models import Job
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_runs
from workflows.domain.execution import run_path
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution
from workflows.steps.split.config import split_bucket

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
RUNS = 600  # enough that the runs are still in flight at both kills on a quiet machine
ENV = {"JOB_POLL_INTERVAL": "0.2", "JOB_EXECUTION_TIMEOUT": "3", "LOG_LEVEL": "WARNING"}
STEPS = [
    {"key": "seen", "action_type": "add_tag", "config": {"tag": "seen"}},
    {
        "key": "check",
        "action_type": "branch",
        "config": {
            "branches": [
                {"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "ab"}
            ],
            "default": "cold",
        },
    },
    {
        "key": "ab",
        "action_type": "split",
        "config": {"paths": [{"name": "A", "weight": 50, "next": "a"}, {"name": "B", "weight": 50, "next": "b"}]},
    },
    {"key": "a", "action_type": "add_tag", "config": {"tag": "path_a"}, "next": "$end"},
    {"key": "b", "action_type": "add_tag", "config": {"tag": "path_b"}, "next": "$end"},
    {"key": "cold", "action_type": "add_tag", "config": {"tag": "cold"}},
]


def expected_path(run: WorkflowExecution, vip: bool) -> list[str]:
    if not vip:
        return ["seen", "check", "cold"]
    return ["seen", "check", "ab", "a" if split_bucket(run.pk, "ab") < 50 else "b"]


def completed() -> int:
    return WorkflowExecution.objects.filter(status="completed").count()


def kill_mid_job(*workers):
    """kill -9 whichever of the workers first holds a claimed job, so the kill hits work in flight however the
    workers share the runs (one may start late and never claim) and however loaded the box is."""
    by_pid = {f":{worker.pid}:": worker for worker in workers}

    def holder():
        for worker_id in Job.objects.filter(status="running").values_list("worker_id", flat=True):
            for mark, worker in by_pid.items():
                if mark in worker_id:
                    return worker
        return None

    victim = wait_until(holder, 60, "a worker to hold a job")
    victim.kill()
    return victim


def test_kill_9_during_branches_and_every_run_continues_on_the_same_path(start_worker):
    account = AccountFactory(max_concurrent_executions=RUNS + 10)
    contacts = [ContactFactory(account=account, tags=["vip"] if i % 2 else []) for i in range(RUNS)]
    vip = {c.pk: bool(c.tags) for c in contacts}
    workflow = make_workflow(account, STEPS)
    workers = [start_worker(**ENV), start_worker(**ENV)]
    start_runs(workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts])

    workers.remove(kill_mid_job(*workers))
    workers.append(start_worker(**ENV))
    wait_until(lambda: completed() >= RUNS // 3, 60, "a third of the runs to complete")
    kill_mid_job(*workers)
    killed_at = time.monotonic()
    start_worker(**ENV)
    wait_until(lambda: completed() == RUNS, 120, "every run to complete")
    assert time.monotonic() - killed_at < 120

    # The kills hit work in flight: jobs the killed workers held were rescued and run again.
    assert Job.objects.filter(handler="workflow_step", attempt_number__gt=1).exists()
    runs = list(WorkflowExecution.objects.filter(workflow=workflow))
    assert len(runs) == RUNS
    rows: dict = {}
    for execution_id, key, outcome, decision in (
        ExecutionLog.objects.filter(execution__workflow=workflow)
        .order_by("id")
        .values_list("execution_id", "step_key", "outcome", "decision")
    ):
        rows.setdefault(execution_id, []).append((key, outcome, decision))
    for run in runs:
        path = expected_path(run, vip[run.contact_id])
        assert run.status == "completed"
        assert run_path(run.context, run.current_step_index, run.step_count, run.current_step_key) == path
        logged = rows[run.pk]
        assert [key for key, _o, _d in logged] == path, f"run {run.pk}: every step of its path logged once"
        assert all(outcome == "succeeded" for _k, outcome, _d in logged)
        decisions = {key: decision for key, _o, decision in logged}
        assert decisions["check"]["next"] == path[2]
        if vip[run.contact_id]:
            assert decisions["ab"]["bucket"] == split_bucket(run.pk, "ab")
