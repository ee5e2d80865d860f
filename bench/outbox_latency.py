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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
APP_DB, JOBS_DB = "relay_bench_app", "relay_bench_jobs"

sys.path.insert(0, str(ROOT))
from bench.pickup import PickupLog, summary  # noqa: E402
from bench.queue_throughput import admin, start_workers, stop_workers  # noqa: E402 - sets its own URL

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

    log = PickupLog("relay_outbox_")

    def through_outbox(seq: int, path: str) -> None:  # rule 2: inside a transaction on default
        with transaction.atomic():
            enqueue("bench.latency", {"seq": seq, "path": path})

    def alternating(seq: int, path: str) -> None:  # odd: through the outbox; even: direct (rule 3)
        if seq % 2:
            through_outbox(seq, path)
        else:
            enqueue("bench.latency", {"seq": seq, "path": path})

    log_dir = Path(tempfile.mkdtemp(prefix="relay_outbox_logs_"))
    workers = start_workers(args.procs, args.concurrency, log_dir, "outbox")
    try:
        log.warm_up(through_outbox, what=f" (logs in {log_dir})")  # workers up, listening on both databases
        log.paced(args.count, args.gap, alternating)
    finally:
        stop_workers(workers)
    result: dict[str, Any] = {
        "direct": summary(log.latencies_ms(lambda i: i % 2 == 0)),
        "outbox": summary(log.latencies_ms(lambda i: i % 2 == 1)),
    }
    log.remove()
    result["added_p50_ms"] = round(result["outbox"]["p50_ms"] - result["direct"]["p50_ms"], 2)
    print(json.dumps(result, indent=2))
    if not args.keep_db:
        from django.db import connections

        connections.close_all()
        for db in (APP_DB, JOBS_DB):
            admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
