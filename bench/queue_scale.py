#!/usr/bin/env python
"""The queue at scale (issue 15): fair claims whatever the backlog, a big table, a purge beside the workers.

Scenarios (each prints one JSON line per measurement):
  empty     reference: 20,000 no-op jobs of no account drained by N worker processes, then pickup (W2's
            method: one job per committed transaction, 200 times, 50 ms apart; latency = handler start -
            enqueue returned).
  blocked   the same with one account held at its limit (10 of 10 running, leases far away) and --backlog
            due jobs waiting (50,000; 500,000), plus --completed finished jobs (default 1,000,000).
  accounts  1,000 accounts x 100 due jobs, limit 2 each: drain jobs/s and the spread of each account's last
            completion (p50 / p99 / max seconds after the workers started).
  bigtable  --rows finished jobs (default 2,000,000), then 2,000 claims of one job each (enqueue, claim,
            complete, in this process): claim p50 / p99 ms. The same on an empty table first.
  purge     --rows finished jobs older than the retention, then pickup while jobs.purge deletes them.

Run:  .venv/bin/python bench/queue_scale.py [--code DIR] [--procs 2] [--backlog 50000] SCENARIO...
--code DIR: the Relay checkout whose code runs (its manage.py, workers and queue; default: this one), e.g.
/work/wt/base for the commit before. The database (BENCH_DB, default relay_bench_scale) on 127.0.0.1:5432
(BENCH_PG_URL) is dropped and created for each scenario, and dropped at the end unless --keep-db.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))  # this checkout's bench helpers, before main() puts --code's modules first
from bench.pickup import PickupLog, pct, summary  # noqa: E402

SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")


# Every 10 ms until SIGTERM: what this database's active statements (other than its own) wait for, by wait
# event ("running": on the CPU). "Lock:advisory" is the claims' own serialization; "Lock:tuple" or
# "Lock:transactionid" would be a row lock held by another transaction, e.g. a purge's.
WAIT_SAMPLER = """
import collections, json, signal, sys, time, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True)
n = collections.Counter()
signal.signal(signal.SIGTERM, lambda *a: (print(json.dumps(dict(n.most_common()))), sys.exit(0)))
while True:
    for kind, count in conn.execute(
        "SELECT coalesce(wait_event_type || ':' || wait_event, 'running'), count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND backend_type = 'client backend' AND state = 'active'"
        " AND pid <> pg_backend_pid() GROUP BY 1"
    ):
        n[kind] += count
    n["samples"] += 1
    time.sleep(0.01)
"""


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.code = Path(args.code).resolve()
        self.db = args.db
        self.url = f"{SERVER}/{self.db}"
        self.log_dir = Path(tempfile.mkdtemp(prefix="relay_scale_"))
        self.env = {
            **os.environ,
            "DATABASE_URL": self.url,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "JOB_HANDLER_MODULES": "bench.handlers",
            "LOG_LEVEL": "WARNING",
            "DEBUG": "false",
            "SECRET_KEY": "bench",
            "PYTHONPATH": str(self.code),
        }

    # Database ---------------------------------------------------------------------------------------
    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(sql)

    def fresh_database(self) -> None:
        from django.db import connections

        connections.close_all()
        self.admin(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        self.admin(f'CREATE DATABASE "{self.db}"')
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=self.code, check=True, env=self.env)

    def sql(self, statement: str, params: list | None = None) -> list[tuple]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(statement, params or [])
            return cursor.fetchall() if cursor.description else []

    def fill(self, count: int, *, status: str, account_id: int | None, age_days: float = 0.0) -> None:
        """Insert `count` jobs in chunks of 200,000 (one statement each), finished ones `age_days` old."""
        for start in range(0, count, 200_000):
            n = min(200_000, count - start)
            self.sql(
                "INSERT INTO jobs_job (id, queue, handler, payload, status, priority, run_at, created_at,"
                " completed_at, started_at, attempt_number, max_attempts, account_id, error_message, worker_id,"
                " lease_expires_at)"
                # ids as the queue makes them (uuid7: the creation's milliseconds first; the purge relies on it)
                " SELECT (lpad(to_hex((extract(epoch FROM t.created) * 1000)::bigint), 12, '0') || '7'"
                "         || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,"
                "   'default', 'noop', '{}', %s, 0, t.created, t.created,"
                "   CASE WHEN %s = 'completed' THEN now() - (%s::float8 * interval '1 day') END,"
                "   CASE WHEN %s <> 'pending' THEN now() END,"
                "   CASE WHEN %s = 'pending' THEN 0 ELSE 1 END, 3, %s, '',"
                "   CASE WHEN %s = 'running' THEN 'bench-ghost' ELSE '' END,"
                "   CASE WHEN %s = 'running' THEN now() + interval '1 day' END"
                " FROM (SELECT now() - (%s::float8 * interval '1 day') - make_interval(secs => %s::int - g) AS created"
                "       FROM generate_series(1, %s) AS g) AS t",
                [status, status, age_days, status, status, account_id, status, status, age_days, n, n],
            )
        self.sql("ANALYZE jobs_job")

    def vacuums(self) -> int:
        """VACUUMs of jobs_job not by autovacuum: the workers' own (jobs.application.vacuum), off on this server."""
        self.sql("SELECT pg_stat_clear_snapshot()")
        rows = self.sql("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs_job'")
        return int(rows[0][0]) if rows else 0

    def account(self, limit: int, slug: str) -> int:
        from accounts.models import Account

        return Account.objects.create(name=slug, slug=slug, max_concurrent_jobs=limit).pk

    # Workers ----------------------------------------------------------------------------------------
    def start_workers(self, tag: str) -> list[subprocess.Popen]:
        workers = []
        for i in range(self.args.procs):
            log = open(self.log_dir / f"{tag}_w{i}.log", "w")  # noqa: SIM115 - lives as long as the worker
            workers.append(
                subprocess.Popen(
                    [sys.executable, "manage.py", "runworker", "--concurrency", str(self.args.concurrency)],
                    cwd=self.code,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        return workers

    @staticmethod
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

    # Measurements -------------------------------------------------------------------------------------
    def drain(self, n: int, tag: str) -> dict:
        """Enqueue n no-op jobs of no account in bulk, start the workers, time until none is left."""
        from jobs.application.queue import JobSpec, enqueue_many

        enqueue_many(JobSpec("noop", {"i": i}) for i in range(n))
        left_sql = (
            "SELECT count(*) FROM jobs_job WHERE account_id IS NULL AND status IN ('pending', 'retrying', 'running')"
        )
        launched = time.time()
        workers = self.start_workers(tag)
        first_t = None
        first_left = n
        try:
            while True:
                (left,) = self.sql(left_sql)[0]
                now = time.time()
                if left < n and first_t is None:
                    first_t, first_left = now, left
                if left == 0:
                    break
                if now - launched > self.args.timeout:
                    raise RuntimeError(f"drain timed out with {left}/{n} left")
                time.sleep(0.25)
        finally:
            self.stop_workers(workers)
        assert first_t is not None
        return {
            "drain_steady_per_s": round(first_left / max(now - first_t, 1e-6), 1),
            "drain_wall_s": round(now - launched, 2),
        }

    def pickup(self, tag: str, *, during=None, sample: bool = False) -> dict:
        """W2's method; `during` (a callable) runs in a thread once the workers are idle. `sample`: what this
        database's active statements wait for, every 10 ms, over the window (WAIT_SAMPLER)."""
        from django.db import connection

        from jobs.application.queue import enqueue

        log = PickupLog("relay_scale_w2_")

        def put(seq: int, path: str) -> None:
            enqueue("bench.latency", {"seq": seq, "path": path})

        workers = self.start_workers(tag)
        side = None
        try:
            log.warm_up(put, timeout=120)
            if during is not None:
                side = threading.Thread(target=during, daemon=True)
                side.start()
                time.sleep(0.5)
            watch = None
            if sample:
                watch = subprocess.Popen(
                    [sys.executable, "-c", WAIT_SAMPLER, self.url], stdout=subprocess.PIPE, text=True
                )
            log.paced(self.args.count, self.args.gap, put)
            side_running = side is not None and side.is_alive()
            if watch is not None:
                watch.terminate()
                waits = json.loads(watch.communicate(timeout=10)[0])
        finally:
            self.stop_workers(workers)
            connection.close()
        out = summary(log.latencies_ms())
        log.remove()
        if sample:
            out["waits_sampled"] = waits
        if during is not None:
            out["side_task_still_running_at_end"] = side_running
            if side is not None:
                side.join()
        return out

    # Scenarios ----------------------------------------------------------------------------------------
    def blocked(self, backlog: int) -> dict:
        self.fresh_database()
        result: dict = {"backlog": backlog, "completed": self.args.completed if backlog else 0}
        if backlog:
            busy = self.account(10, "busy")
            self.fill(self.args.completed, status="completed", account_id=busy)
            self.fill(10, status="running", account_id=busy)
            self.fill(backlog, status="pending", account_id=busy)
        result.update(self.drain(self.args.n, "drain"))
        result.update(self.pickup("pickup"))
        (running,) = self.sql("SELECT count(*) FROM jobs_job WHERE status = 'running'")[0]
        result["busy_running_at_end"] = running
        result["worker_vacuums"] = self.vacuums()
        return result

    def accounts(self) -> dict:
        from accounts.models import Account
        from jobs.application.queue import JobSpec, enqueue_many

        self.fresh_database()
        n_accounts, per = self.args.accounts, 100
        Account.objects.bulk_create(
            Account(name=f"a{i}", slug=f"a{i}", max_concurrent_jobs=2) for i in range(n_accounts)
        )
        ids = list(Account.objects.values_list("pk", flat=True))

        if (self.code / "jobs" / "application" / "limits.py").exists():  # a checkout from before it: no copy
            from jobs.application.limits import repair_limits

            repair_limits()  # bulk_create sends no signal: give the queue its copy of the limits (as a worker would)
        # Account by account, so the first accounts' jobs are all older than the last ones'.
        enqueue_many(JobSpec("noop", {}, account=a) for a in ids for _ in range(per))
        self.sql("ANALYZE jobs_job")
        total = n_accounts * per
        launched = time.time()
        workers = self.start_workers("accounts")
        try:
            while True:
                (left,) = self.sql("SELECT count(*) FROM jobs_job WHERE status <> 'completed'")[0]
                if left == 0:
                    break
                if time.time() - launched > self.args.timeout:
                    raise RuntimeError(f"drain timed out with {left}/{total} left")
                time.sleep(0.25)
        finally:
            self.stop_workers(workers)
        rows = self.sql(
            "SELECT extract(epoch FROM max(completed_at)), extract(epoch FROM min(started_at))"
            " FROM jobs_job GROUP BY account_id"
        )
        start = min(float(r[1]) for r in rows)
        last = [float(r[0]) - start for r in rows]
        wall = max(last)
        return {
            "accounts": n_accounts,
            "jobs": total,
            "drain_per_s": round(total / wall, 1),
            "last_completion_p50_s": round(pct(last, 50), 2),
            "last_completion_p99_s": round(pct(last, 99), 2),
            "last_completion_min_s": round(min(last), 2),
            "last_completion_max_s": round(wall, 2),
        }

    def claims(self, count: int) -> dict:
        from django.db import connection

        from jobs.application.queue import enqueue
        from jobs.infrastructure.store import Finished, get_store

        store = get_store()
        times = []
        for _ in range(count):
            enqueue("noop", {})
            t0 = time.perf_counter()
            (job,) = store.claim("bench", None, 10, 60.0)
            times.append((time.perf_counter() - t0) * 1000)
            now = time.time()
            store.complete("bench", [Finished(job.id, job.attempt_number, now, now)])
        connection.close()
        return {"claim_p50_ms": round(pct(times, 50), 3), "claim_p99_ms": round(pct(times, 99), 3)}

    def bigtable(self) -> list[dict]:
        self.fresh_database()
        out = [{"rows": 0, **self.claims(2000)}]
        self.fill(self.args.rows, status="completed", account_id=None)
        self.sql("CHECKPOINT")
        out.append({"rows": self.args.rows, **self.claims(2000)})
        return out

    def purge(self) -> dict:
        self.fresh_database()
        self.fill(self.args.rows, status="completed", account_id=None, age_days=30)
        self.sql("CHECKPOINT")
        timing: dict = {}
        # In a process of its own: a thread here would hold the GIL and delay the enqueuer's clock readings.
        script = (
            "import django, time; django.setup();"
            "from jobs.application.operations import job_purge;"
            "t0 = time.time(); n = job_purge(retention_days=7, dead_letter_retention_days=30);"
            "print(n, round(time.time() - t0, 1))"
        )

        def run_purge() -> None:
            done = subprocess.run(
                [sys.executable, "-c", script], cwd=self.code, env=self.env, capture_output=True, text=True
            )
            deleted, seconds = done.stdout.split()[-2:]
            timing.update(deleted=int(deleted), purge_s=float(seconds))

        before = self.pickup("before-purge", sample=True)
        during = self.pickup("during-purge", during=run_purge, sample=True)
        return {"rows": self.args.rows, "before": before, "during": during, **timing, "worker_vacuums": self.vacuums()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="+", choices=["empty", "blocked", "accounts", "bigtable", "purge"])
    parser.add_argument("--code", default=str(HERE), help="the Relay checkout to run (default: this one)")
    parser.add_argument("--db", default=os.environ.get("BENCH_DB", "relay_bench_scale"))
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--n", type=int, default=20000, help="jobs drained by empty/blocked")
    parser.add_argument("--backlog", type=int, nargs="+", default=[50_000])
    parser.add_argument("--completed", type=int, default=1_000_000)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(args.code).resolve()))
    bench = Bench(args)
    os.environ.update({k: bench.env[k] for k in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "JOB_HANDLER_MODULES")})
    import django

    django.setup()
    tag = {"code": str(bench.code), "procs": args.procs}
    try:
        for scenario in args.scenarios:
            if scenario == "empty":
                results = [bench.blocked(0)]
            elif scenario == "blocked":
                results = [bench.blocked(b) for b in args.backlog]
            elif scenario == "accounts":
                results = [bench.accounts()]
            elif scenario == "bigtable":
                results = bench.bigtable()
            else:
                results = [bench.purge()]
            for r in results:
                print(json.dumps({"scenario": scenario, **tag, **r}), flush=True)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            bench.admin(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
    print(f"Worker logs: {bench.log_dir}.  Rerun: .venv/bin/python bench/queue_scale.py {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
