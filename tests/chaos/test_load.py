"""Load under pressure: a long REPEATABLE READ transaction held open during a steady load (dead tuples and
pickup latency before, during and after), and one account's burst beside a trickle from others."""

from __future__ import annotations

import statistics
import time

import psycopg
import pytest

from jobs.application.queue import JobSpec, enqueue_many
from tests.chaos.budget import Plan
from tests.chaos.harness import (
    LEASE_SECONDS,
    PrivateDatabase,
    count_rows,
    publish,
    records,
    wait_all_finished,
)
from tests.chaos.invariants import Report, check_jobs, job_created
from tests.factories import AccountFactory

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 3)


def pickup_by_tag(found: list[dict], created: dict[str, float]) -> dict[str, list[float]]:
    waits: dict[str, list[float]] = {}
    for r in found:
        if r["event"] == "start" and r["attempt"] == 1 and r["job"] in created:
            waits.setdefault(r["tag"], []).append(r["db_start"] - created[r["job"]])
    return waits


def dead_tuples(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT n_dead_tup, n_live_tup FROM pg_stat_user_tables WHERE relname = 'jobs_job'"
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def test_a_long_repeatable_read_transaction_during_a_steady_load(plan: Plan, url, runs_path, fleet, private_cluster):
    """On the private cluster, where autovacuum is on and eager, as a queue's tables want it (the shared server
    runs with it off): what the open snapshot holds back shows in the dead tuples."""
    report = Report("long REPEATABLE READ transaction during a steady load")
    database = PrivateDatabase(private_cluster, url)
    snapshot = None
    workers = None
    try:
        workers = fleet(DATABASE_URL=database.url)
        workers.start(2)
        total, rate = plan.count("SNAPSHOT_SECONDS"), plan.count("SNAPSHOT_RATE")
        # The snapshot is held for the middle three fifths of the load.
        phases = [("before", total / 5), ("during", total * 3 / 5), ("after", total / 5)]
        ids: list = []
        tick = 0.25
        for phase, seconds in phases:
            if phase == "during":
                snapshot = psycopg.connect(database.url)
                snapshot.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                snapshot.execute("SELECT count(*) FROM jobs_job").fetchone()  # the snapshot is taken here
            if phase == "after" and snapshot is not None:
                snapshot.rollback()
                snapshot.close()
                snapshot = None
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                started = time.monotonic()
                specs = [JobSpec("chaos.work", {"path": runs_path, "tag": phase}) for _ in range(round(rate * tick))]
                ids += database.enqueue(specs)
                time.sleep(max(0.0, tick - (time.monotonic() - started)))
            dead, live = dead_tuples(database.url)
            report.figures[f"dead_tuples_end_of_{phase}"] = dead
            report.figures[f"live_tuples_end_of_{phase}"] = live
        wait_all_finished(database.url, ids, timeout=120)
        time.sleep(3)  # autovacuum's naptime is 1 s: give it a round with the snapshot gone and no load
        report.figures["dead_tuples_settled"] = dead_tuples(database.url)[0]
        workers.assert_alive()

        found = records(runs_path)
        changes = check_jobs(report, database.url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS)
        workers.check_identities(report, found, changes)
        waits = pickup_by_tag(found, job_created(database.url, ids))
        for phase, _ in phases:
            report.figures[f"pickup_p50_{phase}_seconds"] = percentile(waits.get(phase, []), 0.5)
            report.figures[f"pickup_p99_{phase}_seconds"] = percentile(waits.get(phase, []), 0.99)
        report.figures["load_seconds"] = total
        report.figures["rate_per_second"] = rate
    finally:
        if snapshot is not None:
            snapshot.close()
        if workers is not None:
            workers.kill_all()
        database.remove()
    publish(report, plan)
    report.assert_held()


def test_one_accounts_burst_beside_a_trickle_from_others(plan: Plan, url, runs_path, fleet):
    report = Report("burst from one account beside a trickle")
    burst, trickle = plan.count("BURST_JOBS"), plan.count("TRICKLE_JOBS")
    flood = AccountFactory(max_concurrent_jobs=10)  # of the fleet's 12 executors: room is left for the others
    others = AccountFactory.create_batch(3)
    workers = fleet(concurrency=4)
    workers.start(3)
    started = time.time()
    burst_ids = enqueue_many(
        JobSpec("chaos.work", {"path": runs_path, "tag": "burst"}, account=flood) for _ in range(burst)
    )
    enqueued = time.time()
    trickle_ids: list = []
    for i in range(trickle):  # one every 0.1 s, from three other accounts in turn, while the burst drains
        trickle_ids += enqueue_many(
            [JobSpec("chaos.work", {"path": runs_path, "tag": "trickle"}, account=others[i % len(others)])]
        )
        time.sleep(0.1)
    wait_all_finished(url, trickle_ids, timeout=60)
    report.figures["burst_left_when_the_trickle_was_done"] = count_rows(
        url,
        "SELECT count(*) FROM jobs_job WHERE id = ANY(%s::uuid[]) AND status <> 'completed'",
        [[str(i) for i in burst_ids]],
    )
    finished = wait_all_finished(url, burst_ids, timeout=120 + burst / 50)
    workers.assert_alive()

    found = records(runs_path)
    ids = burst_ids + trickle_ids
    changes = check_jobs(report, url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS)
    workers.check_identities(report, found, changes)
    waits = pickup_by_tag(found, job_created(url, trickle_ids))
    trickle_waits = waits.get("trickle", [])
    report.figures["burst_jobs"] = burst
    report.figures["trickle_jobs"] = trickle
    report.figures["trickle_pickup_p50_seconds"] = percentile(trickle_waits, 0.5)
    report.figures["trickle_pickup_p99_seconds"] = percentile(trickle_waits, 0.99)
    report.figures["trickle_pickup_mean_seconds"] = round(statistics.fmean(trickle_waits), 3) if trickle_waits else None
    report.figures["burst_enqueue_seconds"] = round(enqueued - started, 1)
    report.figures["burst_drain_seconds"] = round(finished - enqueued, 1)
    publish(report, plan)
    report.assert_held()
