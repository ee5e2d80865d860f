"""A worker frozen with SIGSTOP past its lease and then resumed; a worker whose host clock is two minutes off."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.infrastructure.clock import database_now
from jobs.models import Schedule
from kernel.cron import next_tick
from tests.chaos.budget import BUDGET, Plan
from tests.chaos.harness import LEASE_SECONDS, publish, records, sigcont, sigstop, wait_all_finished
from tests.chaos.invariants import Report, check_jobs, check_ticks
from tests.chaos.test_kills import chaos_jobs, once_ids
from tests.e2e.jobs.test_clock_skew import SKEW, libfaketime  # noqa: F401 - the fixture
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def test_a_worker_frozen_past_its_lease_then_resumed_cannot_finalise_what_another_worker_took(
    plan: Plan, url, runs_path, fleet
):
    report = Report("worker frozen with SIGSTOP past its lease")
    n = plan.count("FROZEN_JOBS")
    workers = fleet(concurrency=n, JOB_BATCH_SIZE="1")  # one job per executor: all run at once
    (frozen,) = workers.start(1)
    # Long enough to be caught mid-attempt; half exactly-once, half at-least-once.
    specs = [
        JobSpec("chaos.work", {"path": runs_path, "sleep": 2.0, "once": i % 2 == 0, "tag": "frozen"}) for i in range(n)
    ]
    ids = enqueue_many(specs)
    wait_until(
        lambda: len([r for r in records(runs_path) if r["event"] == "start"]) == n, BUDGET.cap(30), "all jobs to start"
    )
    sigstop(frozen)
    frozen_at = time.time()
    (other,) = workers.start(1)  # rescues the jobs once their lease passes, and runs them again

    def second_attempts() -> int:
        return len({r["job"] for r in records(runs_path) if r["event"] == "start" and r["attempt"] == 2})

    # Resumed once another worker is running every job again: the frozen handlers wake up, finish, and try to
    # commit (exactly-once) and acknowledge (at-least-once) attempts that are no longer theirs.
    wait_until(lambda: second_attempts() == n, 30 + LEASE_SECONDS, "every job's second attempt to start")
    sigcont(frozen)
    resumed_at = time.time()
    finished = wait_all_finished(url, ids, timeout=60)
    time.sleep(1.0)  # whatever the resumed worker still meant to write, it has tried by now
    workers.assert_alive()

    found = records(runs_path)
    changes = check_jobs(
        report, url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS, once_ids=once_ids(ids, specs)
    )
    workers.check_identities(report, found, changes)
    stale_ends = [r for r in found if r["event"] == "end" and r["attempt"] == 1 and r["outcome"] == "done"]
    report.figures["stale_attempts_that_returned"] = len(stale_ends)
    report.figures["frozen_seconds"] = round(resumed_at - frozen_at, 2)
    report.figures["recovery_seconds"] = round(finished - frozen_at, 2)  # includes waiting out the lease
    publish(report, plan)
    report.assert_held()
    assert stale_ends, "no frozen handler returned after its resume: the scenario tested nothing"
    assert other.proc.poll() is None


def test_a_worker_two_minutes_fast_keeps_leases_due_times_and_ticks_on_the_database_clock(
    plan: Plan,
    url,
    runs_path,
    fleet,
    libfaketime,  # noqa: F811 - the fixture
):
    report = Report("worker host clock two minutes off")
    n = plan.count("SKEW_JOBS")
    workers = fleet()
    (skewed,) = workers.start(
        1, wait=False, LD_PRELOAD=libfaketime, FAKETIME=f"+{SKEW:.0f}s", FAKETIME_DONT_FAKE_MONOTONIC="1"
    )
    workers.start(1, wait=False)  # and one on time: both claim, rescue and fire ticks
    workers.wait_started()
    cron = "* * * * *"
    first_tick = database_now().replace(microsecond=0) + dt.timedelta(seconds=3)
    Schedule.objects.create(
        name="chaos-every-minute",
        cron=cron,
        handler="chaos.work",
        payload={"path": runs_path, "tag": "cron"},
        next_run_at=first_tick,
    )
    # Some fail their first attempt: their retry is due by the database's clock. No sleep in the handler:
    # under libfaketime a short sleep fails with EINVAL.
    specs = chaos_jobs(runs_path, n, sleep=0)
    ids = enqueue_many(specs)
    wait_all_finished(url, ids, timeout=60 + n / 10)
    # The ticks that came due: the first, and every minute boundary the drain ran past (no waiting for one: a
    # skewed worker reading its own clock would fire the next ticks up to two minutes early, which I6 sees).
    wait_until(lambda: database_now() > first_tick + dt.timedelta(seconds=3), BUDGET.cap(30), "the first tick")
    cutoff = database_now() - dt.timedelta(seconds=3)
    due = [first_tick]
    while next_tick(cron, due[-1]) <= cutoff:
        due.append(next_tick(cron, due[-1]))
    expected = {tick.isoformat() for tick in due}
    wait_until(lambda: fired_ticks(runs_path) >= expected, BUDGET.cap(20), "the due ticks' jobs to run")
    workers.assert_alive()

    found = records(runs_path)
    changes = check_jobs(
        report, url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS, once_ids=once_ids(ids, specs)
    )
    check_ticks(report, url, handler="chaos.work", tag="cron", due=[tick.isoformat() for tick in due])
    workers.check_identities(report, found, changes)
    skewed_starts = [r for r in found if r["event"] == "start" and f":{skewed.pid}:" in r["worker"]]
    report.figures["attempts_on_the_skewed_worker"] = len(skewed_starts)
    report.figures["host_clock_offset_seconds"] = SKEW
    publish(report, plan)
    report.assert_held()
    assert skewed_starts, "the skewed worker ran nothing: the scenario tested nothing"


def fired_ticks(path: str) -> set[str]:
    return {r["scheduled_for"] for r in records(path) if r.get("tag") == "cron" and r["event"] == "start"}
