#!/usr/bin/env python
"""Relay's queue on the anchor workloads (../shared/bench-anchors), same method, same machine.

W1 drain: enqueue 2,000 jobs one per transaction (rate), then 20,000 no-op jobs in bulk (rate),
then start N `runworker` processes and time the drain (steady rate excludes worker start-up).
W2 pickup: with idle workers, enqueue one job per committed transaction, 200 times, 50 ms apart;
latency = handler start - the moment the enqueue call returned (committed).

Run:  .venv/bin/python bench/queue_throughput.py [--rounds 3] [--procs 2] [--concurrency 1]
             [--metrics-interval S] [--sweep] [--code DIR]
It creates (and drops at the end) the PostgreSQL database `relay_bench_queue` on 127.0.0.1:5432
(BENCH_PG_URL overrides the server URL, without the database name; BENCH_QUEUE_DB the database's name, BENCH_DB
as well, as bench/worker_cpu.py reads it).
--metrics-interval S: the workers count the /metrics gauges every S seconds (JOB_METRICS_INTERVAL; 0: off).
--sweep: while jobs drain, this process runs the retention sweep (jobs.purge) once a second.
--code DIR: the Relay checkout whose code runs (its manage.py, workers, queue and migrations; default: this
one), e.g. a worktree of the commit before, for interleaved A/B runs with this script's measurements.
BENCH_CPU=1: W1 also reports what the drain cost (bench/pgcost.py): the database's backends' and the workers'
CPU µs per job over the steady drain, commits, WAL bytes, heap tuples and index entries per job (this
database's WAL records, via pg_walinspect), for the bulk enqueue and for the drain separately.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _code_dir() -> Path:
    """--code DIR, read before Django is imported (it decides which checkout's modules load)."""
    for position, arg in enumerate(sys.argv):
        if arg == "--code" and position + 1 < len(sys.argv):
            return Path(sys.argv[position + 1]).resolve()
        if arg.startswith("--code="):
            return Path(arg.split("=", 1)[1]).resolve()
    return HERE


ROOT = _code_dir()
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_QUEUE_DB") or os.environ.get("BENCH_DB") or "relay_bench_queue"
DATABASE_URL = f"{SERVER}/{DB}"

sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = str(ROOT)
os.environ["DATABASE_URL"] = DATABASE_URL
WANT_CPU = bool(os.environ.get("BENCH_CPU"))
SETUP_SQL = ""  # --setup-sql
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["JOB_HANDLER_MODULES"] = "bench.handlers"


def _bench_module(name: str):
    """bench/<name>.py from this checkout, whichever checkout's code runs (--code)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"relay_bench_{name}", HERE / "bench" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


PICKUP = _bench_module("pickup")  # W2's measure, shared with queue_scale.py and outbox_latency.py
pct = PICKUP.pct


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def setup() -> None:
    admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ)
    if SETUP_SQL:  # an experiment on the schema, before it becomes a migration
        import psycopg

        with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
            conn.execute(SETUP_SQL)


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_job")
        cursor.execute("VACUUM ANALYZE jobs_job")


METRICS_INTERVAL: str | None = None  # set by --metrics-interval


def start_workers(procs: int, concurrency: int, log_dir: Path, tag: str) -> list[subprocess.Popen]:
    env = {**os.environ, "LOG_LEVEL": "WARNING", "DEBUG": "false", "SECRET_KEY": "bench"}
    if METRICS_INTERVAL is not None:
        env["JOB_METRICS_INTERVAL"] = METRICS_INTERVAL
    workers = []
    for i in range(procs):
        log = open(log_dir / f"{tag}_w{i}.log", "w")  # noqa: SIM115 - lives as long as the worker
        workers.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "runworker", "--concurrency", str(concurrency)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    return workers


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        if w.poll() is None:
            os.killpg(w.pid, signal.SIGTERM)
    for w in workers:
        try:
            w.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(w.pid, signal.SIGKILL)
            w.wait(5)


class Sweep:
    """The retention sweep (what the hourly jobs.purge schedule runs), once a second, beside the workers."""

    def __init__(self, enabled: bool) -> None:
        import threading

        self.enabled = enabled
        self.stop = threading.Event()
        self.passes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.enabled:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.enabled:
            self.thread.join(10)

    def _run(self) -> None:
        from django.db import connection

        from jobs.application.operations import job_purge

        try:
            while not self.stop.wait(1.0):
                job_purge(retention_days=7, dead_letter_retention_days=30)
                self.passes += 1
        finally:
            connection.close()


def count_completed() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM jobs_job WHERE status = 'completed'")
        return cursor.fetchone()[0]


def w1(args, log_dir: Path) -> dict:
    from django.db import connection

    from jobs.application.queue import JobSpec, enqueue, enqueue_many

    reset()
    started = time.time()
    for i in range(args.single):
        enqueue("noop", {"i": i})  # autocommit: one transaction per job
    single_s = time.time() - started
    reset()
    cost = cpu0 = cpu1 = None
    if WANT_CPU:
        cost = _bench_module("pgcost").PgCost(SERVER, DB)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            cost.exclude_backend(cursor.fetchone()[0])
        db0 = cost.db()
    started = time.time()
    enqueue_many(JobSpec("noop", {"i": i}) for i in range(args.n))
    bulk_s = time.time() - started
    if cost is not None:
        with connection.cursor() as cursor:
            cost.flush_stats(cursor)
        time.sleep(0.2)
        db1 = cost.db()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
    if cost is not None:
        db1 = cost.db()  # after ANALYZE: its catalog writes are neither the enqueue's nor the drain's

    launched = time.time()
    workers = start_workers(args.procs, args.concurrency, log_dir, "w1")
    if cost is not None:
        cost.worker_sids = {w.pid for w in workers}  # each worker leads its own session
    first_t: float | None = None
    first_c = 0
    sweep = Sweep(args.sweep).__enter__()
    try:
        while True:
            done = count_completed()
            now = time.time()
            if done and first_t is None:
                first_t, first_c = now, done
                if cost is not None:
                    cpu0 = cost.cpu()
            if done >= args.n:
                if cost is not None:
                    cpu1 = cost.cpu()
                break
            if now - launched > args.timeout:
                raise RuntimeError(f"drain timed out with {done}/{args.n} done")
            time.sleep(0.2)
    finally:
        sweep.__exit__()
        stop_workers(workers)
    assert first_t is not None  # set when the first job completed
    extra: dict = {}
    if cost is not None and cpu0 is not None and cpu1 is not None:
        time.sleep(1.0)  # the workers' backends publish their last counters as they exit
        db2 = cost.db()
        extra["drain_cpu"] = cost.cpu_per_job(cpu0, cpu1, args.n - first_c)
        extra["drain_writes"] = cost.writes_per_job(db1, db2, args.n)
        extra["enqueue_writes"] = cost.writes_per_job(db0, db1, args.n)
    return {
        **extra,
        "workload": "W1",
        "enqueue_single_per_s": round(args.single / single_s, 1),
        "enqueue_bulk_per_s": round(args.n / bulk_s, 1),
        "drain_steady_per_s": round((args.n - first_c) / (now - first_t), 1),
        "drain_wall_per_s": round(args.n / (now - launched), 1),
        "startup_s": round(first_t - launched, 2),
    }


def w2(args, log_dir: Path) -> dict:
    from jobs.application.queue import enqueue

    reset()
    log = PICKUP.PickupLog("relay_w2_")

    def put(seq: int, path: str) -> None:
        enqueue("bench.latency", {"seq": seq, "path": path})

    workers = start_workers(args.procs, args.concurrency, log_dir, "w2")
    sweep = Sweep(args.sweep).__enter__()
    try:
        log.warm_up(put)  # workers up and listening, then idle
        log.paced(args.count, args.gap, put)
    finally:
        sweep.__exit__()
        stop_workers(workers)
    lats = log.latencies_ms()
    log.remove()
    return {"workload": "W2", **PICKUP.summary(lats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1, help="executor threads per worker process")
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--single", type=int, default=2000)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--only", choices=["W1", "W2"], default=None)
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    parser.add_argument("--metrics-interval", default=None, help="JOB_METRICS_INTERVAL for the workers (seconds)")
    parser.add_argument("--sweep", action="store_true", help="run the retention sweep every second while draining")
    parser.add_argument("--code", default=str(HERE), help="the Relay checkout to run (default: this one)")
    parser.add_argument("--setup-sql", default="", help="SQL run after the migrations (schema experiments)")
    args = parser.parse_args()
    global METRICS_INTERVAL, SETUP_SQL
    METRICS_INTERVAL = args.metrics_interval
    SETUP_SQL = args.setup_sql

    setup()
    if WANT_CPU:
        _bench_module("pgcost").PgCost(SERVER, DB).install()
    import django

    django.setup()
    log_dir = Path(tempfile.mkdtemp(prefix="relay_bench_"))
    results: list[dict] = []
    try:
        for round_no in range(1, args.rounds + 1):
            for workload in ("W1", "W2"):
                if args.only and workload != args.only:
                    continue
                result = (w1 if workload == "W1" else w2)(args, log_dir)
                result.update(
                    round=round_no,
                    procs=args.procs,
                    concurrency=args.concurrency,
                    metrics_interval=args.metrics_interval,
                    sweep=args.sweep,
                )
                print(json.dumps(result), flush=True)
                results.append(result)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')

    print(
        f"\nRelay queue ({ROOT}), {args.procs} worker processes x concurrency {args.concurrency},"
        f" median of {args.rounds}:"
    )
    for workload, keys in (
        ("W1", ["drain_steady_per_s", "drain_wall_per_s", "enqueue_bulk_per_s", "enqueue_single_per_s"]),
        ("W2", ["p50_ms", "p95_ms", "p99_ms", "max_ms"]),
    ):
        rows = [r for r in results if r["workload"] == workload]
        for key in keys if rows else []:
            values = [r[key] for r in rows]
            spread = f"[{min(values):,.1f}-{max(values):,.1f}]"
            print(f"  {workload} {key:22s} median {statistics.median(values):>10,.1f}  {spread}")
    costs = [r for r in results if "drain_cpu" in r]
    for section, key in (
        ("drain_cpu", "db_cpu_us_per_job"),
        ("drain_cpu", "worker_cpu_us_per_job"),
        ("drain_cpu", "pg_other_cpu_us_per_job"),
        ("drain_writes", "job_index_entries_per_job"),
        ("drain_writes", "job_tuples_per_job"),
        ("drain_writes", "wal_bytes_per_job"),
        ("drain_writes", "commits_per_job"),
        ("enqueue_writes", "job_index_entries_per_job"),
        ("enqueue_writes", "wal_bytes_per_job"),
    ):
        values = [r[section][key] for r in costs]
        if values:
            spread = f"[{min(values):,.2f}-{max(values):,.2f}]"
            print(f"  W1 {section}.{key:28s} median {statistics.median(values):>10,.2f}  {spread}")
    print(f"Worker logs: {log_dir}.  Rerun: .venv/bin/python bench/queue_throughput.py {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
