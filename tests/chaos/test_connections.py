"""The database goes away under the workers: a PostgreSQL restart (a private cluster), every worker
connection cut, and the notification connection alone cut."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from jobs.application.queue import JobSpec, enqueue_many
from tests.chaos.budget import Plan
from tests.chaos.harness import (
    LEASE_SECONDS,
    PrivateDatabase,
    count_rows,
    faults_during,
    in_flight,
    publish,
    records,
    recovery_seconds,
    terminate,
    wait_all_finished,
)
from tests.chaos.invariants import Report, check_jobs, check_pickup, job_created
from tests.chaos.test_kills import chaos_jobs, once_ids

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def _own_backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _progress(url: str, n: int):
    def progress() -> float:
        try:
            return count_rows(url, "SELECT count(*) FROM jobs_job WHERE status = 'completed'") / n
        except Exception:  # the server is down or starting: no answer this time
            return 0.0

    return progress


def test_a_postgresql_restart_mid_run_loses_nothing_and_the_caught_jobs_complete_soon_after(
    plan: Plan, url, runs_path, fleet, private_cluster
):
    report = Report("PostgreSQL restarted mid-run")
    database = PrivateDatabase(private_cluster, url)
    workers = None
    try:
        n = plan.count("CONNECTION_JOBS")
        workers = fleet(DATABASE_URL=database.url)
        workers.start(2)
        specs = chaos_jobs(runs_path, n)
        ids = database.enqueue(specs)
        caught: list[str] = []
        back: list[float] = []

        def restart() -> None:
            caught.extend(in_flight(database.url))
            back.append(database.cluster.restart(down_seconds=1.0))

        faults_during(restart, times=1, progress=_progress(database.url, n))
        report.figures["recovery_seconds"] = recovery_seconds(database.url, caught, back[0])
        finished = wait_all_finished(database.url, ids, timeout=120 + n / 20)
        workers.wait_started()
        workers.assert_alive()
        found = records(runs_path)
        changes = check_jobs(
            report,
            database.url,
            job_ids=ids,
            records=found,
            lease_seconds=LEASE_SECONDS,
            once_ids=once_ids(ids, specs),
        )
        workers.check_identities(report, found, changes)
        report.figures["caught_mid_attempt"] = len(caught)
        report.figures["drain_after_back_seconds"] = round(finished - back[0], 2)
        logs = "".join(workers.logs())
        report.figures["logged_reachable_again"] = logs.count("the database is reachable again")
    finally:
        if workers is not None:
            workers.kill_all()
        database.remove()
    publish(report, plan)
    report.assert_held()


def test_every_worker_connection_cut_mid_run_loses_nothing(plan: Plan, url, runs_path, fleet):
    report = Report("all worker connections terminated")
    n = plan.count("CONNECTION_JOBS")
    workers = fleet()
    workers.start(2)
    specs = chaos_jobs(runs_path, n)
    ids = enqueue_many(specs)
    spare = _own_backend()  # the test's own connection lives on; every other one of this database goes
    cuts: list[tuple[float, list[str], int]] = []

    recoveries: list[float] = []

    def cut() -> None:
        caught = in_flight(url)
        at = time.time()
        cuts.append((at, caught, terminate(url, f"pid <> {spare}")))
        if (recovered := recovery_seconds(url, caught, at)) is not None:
            recoveries.append(recovered)

    faults_during(cut, times=2, progress=_progress(url, n))
    wait_all_finished(url, ids, timeout=120 + n / 20)
    workers.wait_started()
    workers.assert_alive()
    found = records(runs_path)
    changes = check_jobs(
        report, url, job_ids=ids, records=found, lease_seconds=LEASE_SECONDS, once_ids=once_ids(ids, specs)
    )
    workers.check_identities(report, found, changes)
    report.figures["faults"] = len(cuts)
    report.figures["connections_cut"] = sum(c[2] for c in cuts)
    report.figures["caught_mid_attempt"] = sum(len(c[1]) for c in cuts)
    report.figures["recovery_seconds"] = max(recoveries) if recoveries else None
    publish(report, plan)
    report.assert_held()


def test_the_notification_connection_cut_again_and_again_polling_still_picks_every_job_up(
    plan: Plan, url, runs_path, fleet
):
    report = Report("LISTEN connection alone terminated")
    poll = 1.0
    workers = fleet(JOB_POLL_INTERVAL=f"{poll:g}")
    workers.start(2)
    for worker in workers.live:
        worker.wait_for_output("listening for job notifications", timeout=30)
    ids: list = []
    cut = 0
    # For a few seconds the listener is cut as soon as it comes back, and a job is committed every 0.2 s:
    # most are committed while no worker listens, so only polling can find them.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        cut += terminate(url, "application_name = 'relay-listener'")
        ids += enqueue_many([JobSpec("chaos.work", {"path": runs_path, "tag": "unheard"})])
        time.sleep(0.2)
    wait_all_finished(url, ids, timeout=60)
    # Then it is left alone: it comes back and wakes the workers again.
    for worker in workers.live:
        worker.wait_for_output("notification listener lost its connection", timeout=30)
    time.sleep(2 * poll)
    heard = enqueue_many([JobSpec("chaos.work", {"path": runs_path, "tag": "heard"})])
    wait_all_finished(url, heard, timeout=30)
    workers.assert_alive()

    found = records(runs_path)
    changes = check_jobs(report, url, job_ids=ids + heard, records=found, lease_seconds=LEASE_SECONDS)
    # Slack for a loaded machine: a poll is due every `poll` seconds; the claim and the handler start follow.
    check_pickup(report, changes, job_created(url, ids), within=poll + 2.0)
    workers.check_identities(report, found, changes)
    report.figures["listener_connections_cut"] = cut
    publish(report, plan)
    report.assert_held()
    assert cut >= 2, "the listener was never cut: the scenario tested nothing"
