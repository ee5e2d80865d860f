#!/usr/bin/env python
"""How soon every job is completed after PostgreSQL comes back from a restart mid-drain, and whether any
completed job ran twice (issue #14, defect 3).

Each round: a private PostgreSQL cluster (initdb in a temporary directory, another port: the shared server
is never restarted), Relay's schema, N jobs that each append one line (job id, attempt) to a file and sleep
a little, W `runworker` processes draining them. When a share of them is done, the fault: `restart` stops
the server (fast shutdown: every connection is closed), keeps it down `--down` seconds and starts it again;
`terminate` cuts every connection with pg_terminate_backend instead; `none` is the reference (the same
drain, no fault). Then it waits for every job to be
completed (at most `--timeout` seconds) and reads the lines: a job with two lines ran twice.

Figures: recovery = the moment the last job was completed - the moment the database accepted connections
again (so it includes draining the jobs still queued then, ~70 % of them by default); jobs not completed at
+10 s; jobs run twice; what the workers logged about it.

Run:  .venv/bin/python bench/db_restart_recovery.py [--rounds 3] [--jobs 3000] [--workers 2] [--concurrency 2]
          [--sleep 0.002] [--at 0.3] [--down 1] [--fault restart|terminate] [--timeout 60] [--json]
      --vs DIR: run the workers from another checkout too (e.g. `git worktree add /tmp/base 5e40543`),
          interleaved round by round, to compare before and after.
Needs PostgreSQL's initdb/pg_ctl (RELAY_PG_BINDIR overrides where they are); runs them as `postgres` when root.
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
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.private_postgres import PrivateCluster  # noqa: E402

# A module of its own (not in a package), so a worker started from another checkout imports the same handler.
HANDLER_MODULE = """
import os, time
from jobs.application.registry import job_handler


@job_handler("bench.recovery")
def recovery(payload, job):
    time.sleep(payload.get("sleep", 0))
    fd = os.open(payload["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job.id} {job.attempt_number} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)
"""


def _env(url: str, handlers_dir: Path, tree: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": f"{tree}{os.pathsep}{handlers_dir}",
        "JOB_HANDLER_MODULES": "relay_recovery_handlers",
        "LOG_LEVEL": "WARNING",  # workers log every job at INFO
        "DEBUG": "false",
        "SECRET_KEY": "bench-recovery",
        "PYTHONUNBUFFERED": "1",
    }


def _count(url: str, status: str | None = None) -> int:
    import psycopg

    with psycopg.connect(url, connect_timeout=2) as connection:
        sql = "SELECT count(*) FROM jobs_job" + (" WHERE status = %s" if status else "")
        row = connection.execute(sql, [status] if status else []).fetchone()
        return row[0] if row else 0


def _completed(url: str) -> int | None:
    try:
        return _count(url, "completed")
    except Exception:  # the server is down or starting: no answer this time
        return None


def one_round(args: argparse.Namespace, tree: Path) -> dict:
    with PrivateCluster() as cluster, tempfile.TemporaryDirectory(prefix="relay-recovery-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "relay_recovery_handlers.py").write_text(HANDLER_MODULE)
        cluster.start()
        url = cluster.create_database("relay")
        env = _env(url, tmp_path, tree)
        python = sys.executable
        quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=tree, env=env, check=True, **quiet)
        runs = tmp_path / "runs.txt"
        enqueue = (
            "from jobs.application.queue import JobSpec, enqueue_many; "
            f"enqueue_many([JobSpec('bench.recovery', {{'path': {str(runs)!r}, 'sleep': {args.sleep}}})"
            f" for _ in range({args.jobs})])"
        )
        subprocess.run([python, "manage.py", "shell", "-c", enqueue], cwd=tree, env=env, check=True, **quiet)
        logs = [tmp_path / f"worker{i}.log" for i in range(args.workers)]
        workers = [
            subprocess.Popen(
                [python, "manage.py", "runworker", "--concurrency", str(args.concurrency)],
                cwd=tree,
                env=env,
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for log in logs
        ]
        try:
            target = int(args.jobs * args.at)
            deadline = time.monotonic() + 120
            while (_completed(url) or 0) < target:
                if time.monotonic() > deadline:
                    raise RuntimeError("the workers did not start draining")
                time.sleep(0.01)
            before = _completed(url) or 0
            if args.fault == "restart":
                back = cluster.restart(down_seconds=args.down)
            elif args.fault == "none":  # the reference: how long the rest takes with no fault at all
                back = time.time()
            else:
                import psycopg

                with psycopg.connect(url, autocommit=True) as connection:
                    connection.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                back = time.time()
            at_10s = None
            last = None
            while True:
                now = time.time()
                done = _completed(url)
                if done is not None:
                    last = done
                if at_10s is None and now - back >= 10:
                    at_10s = args.jobs - (last or 0)
                if last == args.jobs or now - back > args.timeout:
                    break
                time.sleep(0.02)
            finished_at = time.time()
        finally:
            for worker in workers:
                if worker.poll() is None:
                    os.killpg(worker.pid, signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(worker.pid, signal.SIGKILL)
        lines = runs.read_text().split() if runs.exists() else []
        per_job = Counter(lines[0::3])
        logged = "".join(log.read_text(errors="replace") for log in logs)
        return {
            "tree": str(tree),
            "jobs": args.jobs,
            "completed_before_fault": before,
            "all_completed": last == args.jobs,
            "recovery_seconds": round(finished_at - back, 2) if last == args.jobs else None,
            "not_completed_at_10s": at_10s if at_10s is not None else 0,
            "not_completed_at_end": args.jobs - (last or 0),
            "ran_twice": sum(1 for n in per_job.values() if n > 1),
            "runs": sum(per_job.values()),
            "logged_could_not_acknowledge": logged.count("could not acknowledge"),
            "logged_reachable_again": logged.count("the database is reachable again"),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--sleep", type=float, default=0.002, help="seconds each job takes")
    parser.add_argument("--at", type=float, default=0.3, help="share of jobs completed when the fault comes")
    parser.add_argument("--down", type=float, default=1.0, help="seconds the server stays down (restart)")
    parser.add_argument("--fault", choices=["restart", "terminate", "none"], default="restart")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the rest after the fault")
    parser.add_argument("--vs", type=Path, help="another checkout whose workers run the same rounds, interleaved")
    parser.add_argument("--json", action="store_true", help="print one JSON line per round")
    args = parser.parse_args()

    trees = [ROOT] + ([args.vs.resolve()] if args.vs else [])
    results: dict[Path, list[dict]] = {tree: [] for tree in trees}
    for round_number in range(args.rounds):
        for tree in trees if round_number % 2 == 0 else reversed(trees):
            result = one_round(args, tree)
            results[tree].append(result)
            if args.json:
                print(json.dumps(result), flush=True)
            else:
                print(f"round {round_number + 1} {tree}: {result}", flush=True)
    if args.json:
        return
    down = f", down {args.down:g} s" if args.fault == "restart" else ""
    shape = f"{args.jobs} jobs ({args.workers} workers x {args.concurrency}){down}"
    print(f"\n{args.fault} after {args.at:.0%} of {shape}:")
    for tree, rounds in results.items():
        recoveries = [r["recovery_seconds"] for r in rounds if r["recovery_seconds"] is not None]
        median = f"{statistics.median(recoveries):.2f} s" if recoveries else "never (within the timeout)"
        print(
            f"  {tree}: recovery median {median} over {len(rounds)} rounds {recoveries};"
            f" not completed at +10 s: {[r['not_completed_at_10s'] for r in rounds]};"
            f" not completed at the end: {[r['not_completed_at_end'] for r in rounds]};"
            f" ran twice: {[r['ran_twice'] for r in rounds]}"
        )
    print(f"rerun: .venv/bin/python bench/db_restart_recovery.py {' '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
