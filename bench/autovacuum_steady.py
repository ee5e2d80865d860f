#!/usr/bin/env python
"""Pickup latency and the queue's tables under a steady load, with autovacuum on (issue 14, item 9).

A private PostgreSQL cluster (tests/support/private_postgres.py) is started with `autovacuum = on` (or off,
for the comparison) and otherwise the server's defaults, so what is measured is the storage parameters
migration jobs.0010 gives jobs_job and jobs_lane, not a tuned server. A database there is migrated, two
`runworker` processes are started (bench/queue_throughput.py's start_workers), and this process enqueues
`--rate` no-op jobs a second, one per transaction, for `--minutes`. Pickup latency is measured as
queue_throughput.py's W2 does: the handler's first act (bench.handlers' `bench.latency`) minus the moment
the enqueue call returned (committed).

Every 30 s (`--every`) it prints, for the jobs enqueued in that window: p50/p99 pickup latency, and for
jobs_job and jobs_lane from pg_stat_user_tables: n_dead_tup, n_tup_hot_upd/n_tup_upd (over the window) and
autovacuum_count. A window's latencies are read `--grace` seconds after it closes; jobs not started by then
are counted as `late`. At the end: the first minute against the last.

Run:  .venv/bin/python bench/autovacuum_steady.py [--autovacuum on|off] [--minutes 10] [--rate 250]
             [--procs 2] [--concurrency 1] [--every 30] [--naptime S]
--naptime S sets autovacuum_naptime (the server's default, 60 s, when not given: that is what a
production server runs, and a 10-minute load gives it ten rounds).
Workers, the cluster and its files are removed at the end, on Ctrl-C and on SIGTERM as well.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.queue_throughput import pct, start_workers, stop_workers  # noqa: E402 - needs ROOT on sys.path
from tests.support.private_postgres import PrivateCluster  # noqa: E402

TABLES = ("jobs_job", "jobs_lane")
STATS_SQL = """
    SELECT relname, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count
    FROM pg_stat_user_tables WHERE relname = ANY(%s)
"""


@dataclass
class Window:
    start: float  # elapsed seconds
    end: float
    seqs: list[int] = field(default_factory=list)
    stats: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # table: dead, upd, hot, autovac


def table_stats(url: str) -> dict[str, tuple[int, int, int, int]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SELECT pg_stat_clear_snapshot()")
        rows = connection.execute(STATS_SQL, [list(TABLES)]).fetchall()
    return {name: (int(dead), int(upd), int(hot), int(av)) for name, dead, upd, hot, av in rows}


class Starts:
    """The handler's `seq start-time` lines, read on from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.seen: dict[int, float] = {}

    def read(self) -> dict[int, float]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            seq, started = line.split()
            self.seen[int(seq)] = float(started)
        return self.seen


def latency_ms(window: Window, committed: dict[int, float], starts: dict[int, float]) -> tuple[list[float], int]:
    lats = [(starts[s] - committed[s]) * 1000 for s in window.seqs if s in starts]
    return lats, len(window.seqs) - len(lats)


def ratio(hot: int, upd: int) -> str:
    return f"{hot}/{upd}" + (f" ({100 * hot / upd:.0f}%)" if upd else "")


def report_window(window: Window, previous: dict[str, tuple[int, int, int, int]], lats: list[float], late: int) -> str:
    rate = len(window.seqs) / max(window.end - window.start, 1e-9)
    line = f"{window.end:6.0f} s  {rate:6.1f}/s  "
    line += f"p50 {pct(lats, 50):7.1f} ms  p99 {pct(lats, 99):7.1f} ms  late {late:4d}" if lats else "no pickups"
    for table in TABLES:
        dead, upd, hot, av = window.stats.get(table, (0, 0, 0, 0))
        _, upd0, hot0, _ = previous.get(table, (0, 0, 0, 0))
        line += f" | {table[5:]}: dead {dead:7d} hot/upd {ratio(hot - hot0, upd - upd0):>22s} av {av}"
    return line


def run(args: argparse.Namespace) -> None:
    settings = {"autovacuum": args.autovacuum}
    if args.naptime is not None:
        settings["autovacuum_naptime"] = f"{args.naptime}s"
    cluster = PrivateCluster().init().configure(**settings)
    log_dir = Path(tempfile.mkdtemp(prefix="relay_bench_vacuum_"))
    workers: list[subprocess.Popen] = []
    try:
        cluster.start()
        url = cluster.create_database("relay_bench_vacuum")
        os.environ.update(DATABASE_URL=url, JOB_HANDLER_MODULES="bench.handlers")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, env=os.environ)
        import django

        django.setup()
        from jobs.application.queue import enqueue

        path = log_dir / "starts.txt"
        path.touch()
        starts = Starts(path)
        workers = start_workers(args.procs, args.concurrency, log_dir, "vacuum")
        for s in range(5):  # warm-up: the workers are up and listening before the clock starts
            enqueue("bench.latency", {"seq": -1 - s, "path": str(path)})
        deadline = time.time() + 120
        while len([k for k in starts.read() if k < 0]) < 5:
            if time.time() > deadline:
                raise RuntimeError(f"warm-up jobs not processed (worker logs: {log_dir})")
            time.sleep(0.1)

        print(
            f"autovacuum {args.autovacuum}, naptime {args.naptime or 'default (60)'} s, {args.rate:g} jobs/s "
            f"for {args.minutes:g} min, {args.procs} workers x concurrency {args.concurrency}; "
            f"server {cluster.url('relay_bench_vacuum')}",
            flush=True,
        )
        print("elapsed   enq rate  pickup (jobs enqueued in the window)  | pg_stat_user_tables", flush=True)
        total = args.minutes * 60
        committed: dict[int, float] = {}
        windows: list[Window] = []
        pending: list[Window] = []  # closed, latencies not yet printed
        previous = table_stats(url)
        baseline = previous
        current = Window(0.0, min(args.every, total))
        base = time.time()
        seq = 0
        while True:
            now = time.time() - base
            if now >= current.end:
                current.stats = table_stats(url)
                windows.append(current)
                pending.append(current)
                if current.end >= total:
                    break
                current = Window(current.end, min(current.end + args.every, total))
            if pending and now >= pending[0].end + args.grace:
                done = pending.pop(0)
                before = windows[windows.index(done) - 1].stats if windows.index(done) else baseline
                print(report_window(done, before, *latency_ms(done, committed, starts.read())), flush=True)
            due = base + seq / args.rate
            if due > time.time():
                time.sleep(due - time.time())
            enqueue("bench.latency", {"seq": seq, "path": str(path)})  # autocommit: one transaction per job
            committed[seq] = time.time()
            current.seqs.append(seq)
            seq += 1
        time.sleep(args.grace)
        seen = starts.read()
        for done in pending:
            before = windows[windows.index(done) - 1].stats if windows.index(done) else baseline
            print(report_window(done, before, *latency_ms(done, committed, seen)), flush=True)
        summary(args, windows, baseline, committed, starts)
        print(f"Worker logs: {log_dir}")
        print(f"Rerun: .venv/bin/python bench/autovacuum_steady.py {' '.join(sys.argv[1:])}".rstrip())
    finally:
        from django.db import connections

        connections.close_all()
        stop_workers(workers)
        cluster.remove()


def summary(
    args: argparse.Namespace,
    windows: list[Window],
    baseline: dict[str, tuple[int, int, int, int]],
    committed: dict[int, float],
    starts: Starts,
) -> None:
    """First minute against last minute (latencies with every pickup seen by now, not only the graced ones)."""
    total = windows[-1].end
    spans = [("first minute", 0.0, min(60.0, total)), ("last minute", max(0.0, total - 60), total)]
    seen = starts.read()
    print(f"\n{'':14s} {'enq/s':>7s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'unstarted':>10s} |", end="")
    print(f" {'dead job':>8s} {'dead lane':>10s} {'hot% lane':>10s} {'av job':>7s} {'av lane':>8s}")
    for name, lo, hi in spans:
        inside = [w for w in windows if w.start >= lo and w.end <= hi]
        seqs = [s for w in inside for s in w.seqs]
        lats = [(seen[s] - committed[s]) * 1000 for s in seqs if s in seen]
        before = baseline if windows.index(inside[0]) == 0 else windows[windows.index(inside[0]) - 1].stats
        after = inside[-1].stats
        job, lane = after.get("jobs_job", (0, 0, 0, 0)), after.get("jobs_lane", (0, 0, 0, 0))
        lane_upd = lane[1] - before.get("jobs_lane", (0, 0, 0, 0))[1]
        lane_hot = lane[2] - before.get("jobs_lane", (0, 0, 0, 0))[2]
        hot = f"{100 * lane_hot / lane_upd:.0f}" if lane_upd else "-"
        print(
            f"{name:14s} {len(seqs) / (hi - lo):7.1f} {pct(lats, 50):8.1f} {pct(lats, 99):8.1f} "
            f"{max(lats):8.1f} {len(seqs) - len(lats):10d} | {job[0]:8d} {lane[0]:10d} {hot:>10s} "
            f"{job[3]:7d} {lane[3]:8d}"
        )
    job_hot = windows[-1].stats.get("jobs_job", (0, 0, 0, 0))[2] - baseline.get("jobs_job", (0, 0, 0, 0))[2]
    print(f"(dead and av = at the span's end; hot% lane over the span; jobs_job HOT updates in all: {job_hot})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--autovacuum", choices=["on", "off"], default="on")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=float, default=250, help="jobs enqueued per second, one per transaction")
    parser.add_argument("--procs", type=int, default=2, help="runworker processes")
    parser.add_argument("--concurrency", type=int, default=1, help="executor threads per worker process")
    parser.add_argument("--every", type=float, default=30, help="seconds per printed window")
    parser.add_argument("--grace", type=float, default=5, help="seconds after a window before its latencies")
    parser.add_argument("--naptime", type=int, default=None, help="autovacuum_naptime in seconds")
    args = parser.parse_args()

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's background job starts with it ignored
        signal.signal(sig, stop)
    try:
        run(args)
    except KeyboardInterrupt:
        print("\ninterrupted: workers and cluster removed", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
