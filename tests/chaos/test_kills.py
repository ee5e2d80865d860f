"""kill -9 of random workers, again and again, while they drain jobs and carry workflow runs."""

from __future__ import annotations

import time
from collections import Counter

import psycopg
import pytest

from jobs.application.queue import JobSpec, enqueue_many
from tests.chaos.budget import BUDGET, Plan
from tests.chaos.harness import LEASE_SECONDS, Fleet, count_rows, faults_during, publish, records, wait_all_finished
from tests.chaos.invariants import Report, check_jobs, check_runs
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow
from tests.support.processes import wait_until
from workflows.application.runs.starting import start_runs

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def chaos_jobs(path: str, n: int, *, sleep: float = 0.01, **payload) -> list[JobSpec]:
    """A mix: one in ten exactly-once, one in twenty failing its first attempt, the rest at-least-once."""
    return [
        JobSpec(
            "chaos.work",
            {"path": path, "sleep": sleep, "once": i % 10 == 0, "fail_first": i % 20 == 7, **payload},
        )
        for i in range(n)
    ]


def rows(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(sql).fetchall()


def once_ids(ids: list, specs: list[JobSpec]) -> list:
    return [job_id for job_id, spec in zip(ids, specs, strict=True) if spec.payload.get("once")]


def recovery_after_kills(url: str, fleet: Fleet, found: list[dict]) -> float | None:
    """Seconds from each kill until the last job its worker held was completed by another; the worst. (Read
    from completed_at: the database stayed up, so each completion was written when its handler finished.)"""
    worst = None
    ended = {(r["job"], r["attempt"]) for r in found if r["event"] == "end"}
    for pid, killed_at in fleet.kills:
        cut = [
            r["job"]
            for r in found
            if r["event"] == "start" and f":{pid}:" in r["worker"] and (r["job"], r["attempt"]) not in ended
        ]
        if not cut:
            continue
        last_ms = (
            "SELECT (extract(epoch FROM max(completed_at)) * 1000)::bigint FROM jobs_job WHERE id = ANY(%s::uuid[])"
        )
        done = count_rows(url, last_ms, [cut]) / 1000
        worst = max(worst or 0.0, done - killed_at)
    return round(worst, 2) if worst is not None else None


def test_kill_9_of_random_workers_during_a_drain_loses_no_job_and_completes_none_twice(
    plan: Plan, url, runs_path, fleet
):
    report = Report("kill -9 during jobs")
    n = plan.count("KILL_JOBS")
    workers = fleet()
    workers.start(plan.count("WORKERS"))
    specs = chaos_jobs(runs_path, n)
    ids = enqueue_many(specs)

    def progress() -> float:
        return count_rows(url, "SELECT count(*) FROM jobs_job WHERE status = 'completed'") / n

    started = time.time()
    last = faults_during(workers.kill_random, times=plan.count("KILLS"), progress=progress)
    finished = wait_all_finished(url, ids, timeout=120 + n / 20)
    workers.wait_started()
    workers.assert_alive()

    found = records(runs_path)
    changes = check_jobs(
        report, url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS, once_ids=once_ids(ids, specs)
    )
    workers.check_identities(report, found, changes)
    report.figures["recovery_seconds"] = recovery_after_kills(url, workers, found)
    report.figures["drain_after_last_kill_seconds"] = round(finished - last, 2)
    report.figures["wall_seconds"] = round(finished - started, 1)
    publish(report, plan)
    report.assert_held()
    assert report.figures["kills"] >= 1, "the drain ended before any kill: raise RELAY_CHAOS_KILL_JOBS"


def test_kill_9_of_random_workers_during_workflow_runs_runs_no_step_twice(plan: Plan, url, fleet, webhook_server):
    report = Report("kill -9 during workflow runs")
    n = plan.count("KILL_RUNS")
    account = AccountFactory(max_concurrent_executions=n + 10, max_concurrent_jobs=50)
    contacts = ContactFactory.create_batch(max(1, n // 10), account=account)
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "a"}},  # internal: in the run's own transaction
            {"action_type": "webhook", "config": {"url": webhook_server.url, "body": {"n": "{{ trigger.n }}"}}},
            {"action_type": "update_contact", "config": {"custom_fields": {"n": "{{ trigger.n }}"}}},
        ],
    )
    run_ids: list = []
    for round_number in range(10):
        started_runs = start_runs(
            workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts], trigger_data={"n": round_number}
        )
        run_ids += started_runs.execution_ids
    workers = fleet()
    workers.start(plan.count("WORKERS"))

    def progress() -> float:
        ended = "SELECT count(*) FROM workflows_workflowexecution WHERE status IN ('completed', 'failed', 'cancelled')"
        return count_rows(url, ended) / len(run_ids)

    started = time.time()
    last = faults_during(workers.kill_random, times=plan.count("KILLS"), progress=progress)
    wait_until(lambda: progress() >= 1, BUDGET.cap(120 + len(run_ids) / 5), f"{len(run_ids)} runs to finish")
    finished = time.time()
    workers.wait_started()
    workers.assert_alive()

    check_runs(report, url, run_ids=run_ids)
    # The engine's own jobs (each step's) under the same queue invariants, read from their history.
    step_jobs = [row[0] for row in rows(url, "SELECT id FROM jobs_job WHERE handler LIKE 'workflow%%'")]
    changes = check_jobs(report, url, job_ids=step_jobs, records=None, lease_seconds=LEASE_SECONDS)
    report.figures["step_jobs"] = report.figures.pop("jobs")
    report.figures["step_jobs_lost"] = report.figures.pop("jobs_lost")
    workers.check_identities(report, [], changes)
    # The webhook step is at-least-once: a worker killed after the request and before its commit sends it again
    # on the step job's next attempt, never on the same one.
    per_id = Counter(r.headers["webhook-id"] for r in webhook_server.received)
    duplicates = {key: n for key, n in per_id.items() if n > 1}
    retried = count_rows(
        url,
        "SELECT count(*) FROM jobs_job WHERE handler = 'workflow_step' AND attempt_number > 1",
    )
    report.figures["webhook_deliveries"] = sum(per_id.values())
    report.figures["duplicate_deliveries"] = sum(n - 1 for n in duplicates.values())
    report.figures["step_jobs_with_attempts_over_1"] = retried
    if len(per_id) != len(run_ids):
        report.breach("I1", f"{len(run_ids) - len(per_id)} runs never delivered their webhook")
    if duplicates and sum(n - 1 for n in duplicates.values()) > retried:
        report.breach("I2", "more duplicate webhook deliveries than step attempts after the first", duplicates)
    report.figures["drain_after_last_kill_seconds"] = round(finished - last, 2)
    report.figures["wall_seconds"] = round(finished - started, 1)
    publish(report, plan)
    report.assert_held()
