"""What every chaos scenario shares: a fleet of real `runworker` processes, the faults done to it, and where
the figures go.

Workers are tests/support/processes.py's WorkerProcess (started through the `start_worker` fixture, so each
is stopped after its test); the handler is tests/chaos/handlers.py's `chaos.work`; the checks are
tests/chaos/invariants.py. Figures are printed and, with RELAY_CHAOS_REPORT=<file>, appended to that file as
one JSON line per scenario (`make chaos` collects them for tests/chaos/README.md).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

from tests.chaos.budget import BUDGET, Plan
from tests.chaos.history import Change
from tests.chaos.invariants import Report, check_worker_identities
from tests.support.handlers import read_records
from tests.support.processes import WorkerProcess, wait_until

HANDLER_MODULES = "tests.support.handlers,tests.chaos.handlers"
EXECUTION_TIMEOUT = 3.0  # lease = 3 s + the 2 s margin: a killed worker's jobs come back within seconds
LEASE_SECONDS = 5.0
BASE_ENV = {
    "JOB_HANDLER_MODULES": HANDLER_MODULES,
    "JOB_POLL_INTERVAL": "0.5",
    "JOB_EXECUTION_TIMEOUT": f"{EXECUTION_TIMEOUT:g}",
    "JOB_RETRY_DELAY_SECONDS": "0.5",
    "JOB_RETRY_JITTER": "0",
    "JOB_METRICS_INTERVAL": "0",
    "LOG_LEVEL": "WARNING",  # workers log every job at INFO; the start line is a WARNING-proof print below
    "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
}


class Fleet:
    """Worker processes that come and go: started, killed, frozen, replaced."""

    def __init__(self, start_worker: Callable[..., WorkerProcess], *, concurrency: int = 2, **env: str) -> None:
        self._start_worker = start_worker
        self.concurrency = concurrency
        self.env = {**BASE_ENV, "LOG_LEVEL": "INFO", **env}
        self.all: list[WorkerProcess] = []
        self.live: list[WorkerProcess] = []
        self.apps: dict[str, WorkerProcess] = {}  # each process's application_name (PGAPPNAME): who wrote a change
        self.kills: list[tuple[int, float]] = []  # (pid, when)
        self.rng = random.Random(int(os.environ.get("RELAY_CHAOS_SEED", "14")))

    def start(self, count: int = 1, *, wait: bool = True, **env: str) -> list[WorkerProcess]:
        started = []
        for _ in range(count):
            app = f"chaos-worker-{len(self.all) + 1}"
            worker = self._start_worker("--concurrency", str(self.concurrency), **{**self.env, **env, "PGAPPNAME": app})
            self.apps[app] = worker
            self.all.append(worker)
            started.append(worker)
        self.live += started
        if wait:
            for worker in started:
                worker.wait_for_output(" started: ", timeout=60)
        return started

    def kill_random(self, *, replace: bool = True) -> WorkerProcess:
        """kill -9 one live worker at random (and start another in its place)."""
        ready = [w for w in self.live if " started: " in w.output()] or self.live  # at work, not still importing
        victim = self.rng.choice(ready)
        self.kill(victim)
        if replace:
            self.start(wait=False)
        return victim

    def kill(self, worker: WorkerProcess) -> None:
        self.kills.append((worker.pid, time.time()))
        worker.kill()
        self.live.remove(worker)

    def kill_all(self) -> None:
        """Once the scenario is checked: kill -9 what is left (a graceful stop would only cost time)."""
        for worker in self.live:
            worker.signal(signal.SIGKILL)
        for worker in self.live:
            worker.proc.wait(10)
        self.live = []

    def logs(self) -> list[str]:
        return [worker.output() for worker in self.all]

    def check_identities(
        self, report: Report, records: list[dict[str, Any]], changes: Mapping[str, Sequence[Change]] | None = None
    ) -> None:
        """I8 over every process this fleet started, its attempts (records) and its claims (changes)."""
        check_worker_identities(report, {app: w.output() for app, w in self.apps.items()}, records, changes)
        report.figures["kills"] = len(self.kills)

    def wait_started(self) -> None:
        """Every live worker logged its start (its identity), so I8 sees all of them."""
        for worker in self.live:
            worker.wait_for_output(" started: ", timeout=60)

    def assert_alive(self) -> None:
        dead = [w.pid for w in self.live if w.proc.poll() is not None]
        assert not dead, f"workers exited on their own: {dead}"


def faults_during(fault: Callable[[], Any], *, times: int, progress: Callable[[], float]) -> float:
    """Do `fault` `times` times, spread over the drain: the k-th once `progress()` (0 to 1) passes k/(times+1),
    so every fault lands mid-drain however fast or loaded the machine is; returns the last fault's time."""
    last = time.time()
    for k in range(1, times + 1):
        share = k / (times + 1)

        def passed(share: float = share) -> bool:
            return progress() >= share

        wait_until(passed, BUDGET.cap(300), f"the drain to pass {k}/{times + 1}")
        fault()
        last = time.time()
    return last


def repeat_faults(fault: Callable[[], Any], *, times: int, every: float, until: Callable[[], bool]) -> float:
    """Do `fault` `times` times, `every` seconds apart, stopping early once `until()`; the last fault's time."""
    last = time.time()
    for _ in range(times):
        if until():
            break
        time.sleep(every)
        fault()
        last = time.time()
    return last


def count_rows(url: str, sql: str, params: list | tuple = ()) -> int:
    with psycopg.connect(url, autocommit=True, connect_timeout=3) as connection:
        row = connection.execute(sql, params).fetchone()
        return int(row[0]) if row else 0


def wait_all_finished(url: str, ids: list, timeout: float, *, states=("completed",)) -> float:
    """Wait until every job is in one of `states`; returns when that was (time.time())."""
    strs = [str(i) for i in ids]

    def done() -> bool:
        try:
            return count_rows(
                url,
                "SELECT count(*) FROM jobs_job WHERE id = ANY(%s::uuid[]) AND status = ANY(%s)",
                [strs, list(states)],
            ) == len(strs)
        except psycopg.OperationalError:
            return False

    wait_until(done, BUDGET.cap(timeout), f"{len(strs)} jobs to finish")
    return time.time()


def records(path: Path | str) -> list[dict[str, Any]]:
    return read_records(path)


def publish(report: Report, plan: Plan) -> None:
    """Print the scenario's figures (with the sizes it ran, its share of the budget, the seconds it took and
    the cases each invariant examined), and keep them when RELAY_CHAOS_REPORT names a file."""
    figures = {
        "scenario": report.scenario,
        "key": plan.scenario.key,
        **plan.figures(),
        "seconds": round(time.monotonic() - plan.started, 1),
        **report.figures,
        "checked": dict(sorted(report.checked.items())),
        "violations": report.violations,
    }
    line = json.dumps(figures)
    print(f"\nCHAOS {line}")
    target = os.environ.get("RELAY_CHAOS_REPORT")
    if target:
        with open(target, "a") as out:
            out.write(line + "\n")


def effect_table(url: str) -> None:
    from tests.chaos.handlers import EFFECT_TABLE

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(EFFECT_TABLE)
        connection.execute("TRUNCATE chaos_effect")


def copy_schema(source_url: str, target_url: str) -> None:
    """The test database's schema (tables, indexes, the claim function) into another server's database, in
    seconds rather than the minute `migrate` takes on a loaded machine."""
    dump = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", source_url],
        capture_output=True,
        text=True,
        check=True,
    )
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", target_url],
        input=dump.stdout,
        capture_output=True,
        text=True,
        check=True,
    )


def terminate(url: str, where: str) -> int:
    """pg_terminate_backend on this database's other backends matching `where` (the scenario's own constant
    SQL, never input); how many were cut."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid() AND {}"
    ).format(sql.SQL(where))
    with psycopg.connect(url, autocommit=True) as connection:
        return len(connection.execute(query).fetchall())


def sigstop(worker: WorkerProcess) -> None:
    worker.signal(signal.SIGSTOP)


def sigcont(worker: WorkerProcess) -> None:
    worker.signal(signal.SIGCONT)


def in_flight(url: str) -> list[str]:
    """The jobs running right now: what a fault can catch mid-attempt."""
    with psycopg.connect(url, autocommit=True) as connection:
        return [str(r[0]) for r in connection.execute("SELECT id FROM jobs_job WHERE status = 'running'").fetchall()]


def recovery_seconds(url: str, caught: list[str], fault_at: float, timeout: float = 120.0) -> float | None:
    """Seconds from the fault (or the server's return) until every job it caught mid-attempt is seen completed;
    None if it caught none. Seen, not read from completed_at: a worker that finished a job while the database
    was away writes the completion later, with the time the handler finished."""
    if not caught:
        return None

    def all_completed() -> bool:
        try:
            done = "SELECT count(*) FROM jobs_job WHERE id = ANY(%s::uuid[]) AND status = 'completed'"
            return count_rows(url, done, [caught]) == len(caught)
        except psycopg.OperationalError:
            return False

    wait_until(all_completed, BUDGET.cap(timeout), f"the {len(caught)} jobs caught by the fault to complete")
    return round(time.time() - fault_at, 2)


class PrivateCluster:
    """One private PostgreSQL cluster for the session (tests/support/private_postgres.py), for the faults that
    must not reach the shared server (a restart) and the settings it must not change (autovacuum on, eager, as
    a queue's tables want it; the shared server runs with it off). Started when first needed; each scenario
    gets a database of its own on it, made from a template with the test database's schema."""

    AUTOVACUUM = {
        "autovacuum": "on",
        "autovacuum_naptime": "1s",
        "autovacuum_vacuum_scale_factor": "0",
        "autovacuum_vacuum_threshold": "1000",
    }

    def __init__(self) -> None:
        self._cluster: Any = None
        self._template = False
        self._numbers = itertools.count(1)

    @property
    def cluster(self):
        if self._cluster is None:
            from tests.support.private_postgres import PrivateCluster as Cluster

            self._cluster = Cluster().init().configure(**self.AUTOVACUUM)
            self._cluster.start()
        return self._cluster

    def database(self, source_url: str) -> str:
        """A new database with `source_url`'s schema (tables, the claim function, the chaos history trigger)."""
        cluster = self.cluster
        if not self._template:
            copy_schema(source_url, cluster.create_database("relay_template"))
            self._template = True
        name = f"relay_{next(self._numbers)}"
        with psycopg.connect(cluster.url("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE relay_template')
        return cluster.url(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def remove(self) -> None:
        if self._cluster is not None:
            self._cluster.remove()


class PrivateDatabase:
    """A database of its own on the session's private cluster. Jobs are queued into it through the queue's
    own store on a connection of its own."""

    def __init__(self, private: PrivateCluster, source_url: str) -> None:
        self.private = private
        self.cluster = private.cluster
        self.url = private.database(source_url)
        self._connection: Any = None

    def store(self):
        """The queue's store on a Django connection to this database (made once)."""
        import copy

        from django.db import connections
        from django.db.utils import load_backend

        from jobs.infrastructure.store import store_for

        if self._connection is None:
            settings_dict = copy.deepcopy(connections.settings["default"])
            name = self.url.rsplit("/", 1)[1]
            settings_dict.update(NAME=name, HOST="127.0.0.1", PORT=str(self.cluster.port), USER="postgres")
            self._connection = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, "chaos_private")
        return store_for(self._connection)

    def enqueue(self, specs: list) -> list:
        from jobs.application.queue import prepare_job

        rows = [prepare_job(spec) for spec in specs]
        holders = self.store().insert(rows)
        return [holders[row.id] for row in rows]

    def remove(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self.private.drop(self.url)
