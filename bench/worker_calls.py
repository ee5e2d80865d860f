#!/usr/bin/env python
"""The worker's Python calls per job: one in-process `Worker(burst=True)` drains N no-op jobs while a profile
hook counts every Python and C call in every thread (executor, main thread, services). A count, not a time:
on a shared, loaded box it says exactly whether a change made the worker do more per job, where a timing
cannot tell 10% from noise. The hook slows the drain many times over; only the counts mean anything.

Run:  .venv/bin/python bench/worker_calls.py [--n 2000] [--code DIR] [--top 30]
--code DIR runs another checkout's code (a worktree of the commit before, say) against its own database.
It creates (and drops at the end) the PostgreSQL database BENCH_DB (default `relay_bench_calls`) on
BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any


def _code_dir() -> Path:
    """--code DIR, read before Django is imported (it decides which checkout's modules load)."""
    for position, arg in enumerate(sys.argv):
        if arg == "--code" and position + 1 < len(sys.argv):
            return Path(sys.argv[position + 1]).resolve()
        if arg.startswith("--code="):
            return Path(arg.split("=", 1)[1]).resolve()
    return Path(__file__).resolve().parent.parent


ROOT = _code_dir()
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
DB = os.environ.get("BENCH_DB", "relay_bench_calls")

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
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--code", default=str(ROOT), help="the Relay checkout to run (default: this one)")
    parser.add_argument("--top", type=int, default=30, help="the functions called most, per job")
    args = parser.parse_args()
    admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ)
    import django

    django.setup()
    from django.db import connection

    from jobs.application.queue import JobSpec, enqueue_many
    from jobs.application.worker import Worker

    counts: collections.Counter[str] = collections.Counter()

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            counts[f"{frame.f_code.co_filename.removeprefix(str(ROOT) + '/')}:{frame.f_code.co_name}"] += 1
        elif event == "c_call":
            counts[f"C:{getattr(arg, '__qualname__', arg)}"] += 1

    try:
        enqueue_many(JobSpec("noop", {"i": i}) for i in range(args.n))
        connection.close()
        threading.setprofile(count)
        sys.setprofile(count)
        try:
            Worker(burst=True, concurrency=1, install_signal_handlers=False).run()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    finally:
        connection.close()
        admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    python_calls = sum(n for name, n in counts.items() if not name.startswith("C:"))
    print(f"{ROOT}: {args.n:,} jobs")
    print(f"  calls per job: {sum(counts.values()) / args.n:.1f} ({python_calls / args.n:.1f} Python functions)")
    for name, n in counts.most_common(args.top):
        print(f"  {n / args.n:9.2f}  {name}")


if __name__ == "__main__":
    main()
