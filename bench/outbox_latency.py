#!/usr/bin/env python
"""Pickup latency with the queue in its own database (JOBS_DATABASE): direct enqueue against the outbox.

Two PostgreSQL databases on one server: `relay_bench_app` (DATABASE_URL) and `relay_bench_jobs`
(JOBS_DATABASE_URL). Idle `runworker` processes; this process enqueues one job at a time, `--count` times,
`--gap` seconds apart, alternating (interleaved A/B):
  direct: enqueue() outside any transaction: committed on the queue's database at once (rule 3);
  outbox: enqueue() inside transaction.atomic() on `default`: written to default's outbox, queued when the
          transaction commits, moved by a worker woken by NOTIFY on `default` (rule 2).
Latency = the handler's first statement minus the moment the enqueue (direct) or the commit (outbox)
returned, as W2 in queue_throughput.py. The outbox's cost is the difference between the two.

Run:  .venv/bin/python bench/outbox_latency.py [--count 400] [--gap 0.05] [--procs 2] [--concurrency 1]
It creates (and drops at the end) both databases on 127.0.0.1:5432 (BENCH_PG_URL overrides the server).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
APP_DB, JOBS_DB = "relay_bench_app", "relay_bench_jobs"

sys.path.insert(0, str(ROOT))
from bench.queue_throughput import admin, pct, start_workers, stop_workers  # noqa: E402 - sets its own URL

os.environ["DATABASE_URL"] = f"{SERVER}/{APP_DB}"  # after that import, which sets DATABASE_URL to its own
os.environ["JOBS_DATABASE_URL"] = f"{SERVER}/{JOBS_DB}"


def setup() -> None:
    for db in (APP_DB, JOBS_DB):
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin(f'CREATE DATABASE "{db}"')
    for alias in ("default", "jobs"):
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0", "--database", alias], cwd=ROOT, check=True, env=os.environ
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument("--procs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    setup()
    import django

    django.setup()
    from django.db import transaction

    from jobs.application.queue import enqueue

    path = tempfile.mktemp(prefix="relay_outbox_", suffix=".txt")  # noqa: S306 - the handler appends to it
    Path(path).touch()

    def seen() -> dict[int, float]:
        return {int(s): float(t) for s, t in (line.split() for line in Path(path).read_text().splitlines())}

    log_dir = Path(tempfile.mkdtemp(prefix="relay_outbox_logs_"))
    workers = start_workers(args.procs, args.concurrency, log_dir, "outbox")
    committed: dict[int, float] = {}
    try:
        for s in range(5):  # warm-up: workers up and listening on both databases
            with transaction.atomic():
                enqueue("bench.latency", {"seq": -1 - s, "path": path})
        deadline = time.time() + 60
        while len([k for k in seen() if k < 0]) < 5:
            if time.time() > deadline:
                raise RuntimeError(f"warm-up jobs not processed (logs in {log_dir})")
            time.sleep(0.05)
        time.sleep(2.0)
        base = time.time()
        for i in range(args.count):
            delay = base + i * args.gap - time.time()
            if delay > 0:
                time.sleep(delay)
            if i % 2:
                with transaction.atomic():
                    enqueue("bench.latency", {"seq": i, "path": path})
            else:
                enqueue("bench.latency", {"seq": i, "path": path})
            committed[i] = time.time()
        deadline = time.time() + 60
        while not all(i in seen() for i in range(args.count)) and time.time() < deadline:
            time.sleep(0.1)
    finally:
        stop_workers(workers)
    got = seen()
    os.unlink(path)
    result: dict[str, Any] = {}
    for name, parity in (("direct", 0), ("outbox", 1)):
        lats = [(got[i] - committed[i]) * 1000 for i in range(args.count) if i % 2 == parity and i in got]
        result[name] = {
            "received": len(lats),
            "p50_ms": round(pct(lats, 50), 2),
            "p95_ms": round(pct(lats, 95), 2),
            "p99_ms": round(pct(lats, 99), 2),
            "max_ms": round(max(lats), 2),
        }
    result["added_p50_ms"] = round(result["outbox"]["p50_ms"] - result["direct"]["p50_ms"], 2)
    print(json.dumps(result, indent=2))
    if not args.keep_db:
        from django.db import connections

        connections.close_all()
        for db in (APP_DB, JOBS_DB):
            admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
