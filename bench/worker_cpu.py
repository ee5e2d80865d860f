#!/usr/bin/env python
"""The worker's own CPU per job: one in-process `Worker(burst=True)` drains N no-op jobs; we report the
process's CPU time (user + system) per job, which a machine shared with other work disturbs far less than
wall-clock throughput does, beside the drain rate.

Run:  .venv/bin/python bench/worker_cpu.py [--rounds 5] [--n 20000] [--metrics-interval 30]
It creates (and drops at the end) the PostgreSQL database BENCH_DB (default `relay_bench_cpu`) on
BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432). The same script runs against an older checkout
(copy it into that checkout's bench/) for an A/B comparison, alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "relay_bench_cpu")

sys.path.insert(0, str(ROOT))
os.environ["DATABASE_URL"] = f"{SERVER}/{DB}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.update(LOG_LEVEL="WARNING", DEBUG="false", SECRET_KEY="bench")  # noqa: S106 - a throwaway key


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--metrics-interval", default=None, help="JOB_METRICS_INTERVAL (seconds; 0: off)")
    args = parser.parse_args()
    if args.metrics_interval is not None:
        os.environ["JOB_METRICS_INTERVAL"] = args.metrics_interval
    admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ)
    import django

    django.setup()
    from django.db import connection

    from jobs.application.queue import JobSpec, enqueue_many
    from jobs.application.worker import Worker

    cpu_per_job, rates = [], []
    try:
        for round_no in range(1, args.rounds + 1):
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE jobs_job")
            enqueue_many(JobSpec("noop", {"i": i}) for i in range(args.n))
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE jobs_job")
            cpu, wall = time.process_time(), time.perf_counter()
            Worker(burst=True, concurrency=1, install_signal_handlers=False).run()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM jobs_job WHERE status = 'completed'")
                done = cursor.fetchone()[0]
            result = {
                "round": round_no,
                "completed": done,
                "cpu_us_per_job": round(cpu / done * 1e6, 1),
                "drain_per_s": round(done / wall, 1),
                "metrics_interval": args.metrics_interval,
            }
            print(json.dumps(result), flush=True)
            cpu_per_job.append(result["cpu_us_per_job"])
            rates.append(result["drain_per_s"])
    finally:
        connection.close()
        admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    print(
        f"\nworker CPU per job: median {statistics.median(cpu_per_job):.1f} us [{min(cpu_per_job)}-{max(cpu_per_job)}];"
        f" drain median {statistics.median(rates):,.0f}/s over {args.rounds} rounds of {args.n:,} jobs"
    )
    print(f"Rerun: .venv/bin/python bench/worker_cpu.py --rounds {args.rounds} --n {args.n}", end="")
    print(f" --metrics-interval {args.metrics_interval}" if args.metrics_interval is not None else "")


if __name__ == "__main__":
    main()
