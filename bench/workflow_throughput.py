#!/usr/bin/env python
"""Workflow throughput: N runs of a workflow carried out by real workers on PostgreSQL.

The workflow (`--workload linear`, the default): add a tag, update a custom
field, call a webhook on a local HTTP server that answers at once.
`--workload graph`: five steps through a graph: add a tag, a branch on the
contact's tags, a 50/50 split to one of two update_contact steps, then the
webhook (every run goes through five steps, whichever path it takes). The script creates its own database
(`relay_bench_workflows` by default) and tables (migrate), starts the
webhook server and two `runworker` processes, waits for a short warm-up,
then starts N runs one by one through start_run (each its own
transaction, as API calls would) while the workers carry them out. It
reports runs/s and steps/s (from the first start to the last completion),
p50/p99 of trigger-to-COMPLETED, then stops the workers and drops the
database.

    .venv/bin/python bench/workflow_throughput.py [--runs 2000] [--workers 2] [--concurrency 1] [--trigger bulk]
        [--workload linear|graph]

BENCH_DATABASE_URL overrides the database (it is dropped and created again).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/relay_bench_workflows"


def serve_webhooks(port_queue) -> None:
    """A receiver that answers every request at once: 200 with a small JSON body, HTTP/1.1 keep-alive.

    Written on asyncio streams rather than http.server, so that the receiver (which shares the two
    cores with Relay here, but in production runs elsewhere) costs little CPU per request.
    """
    import asyncio

    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
        b'Connection: keep-alive\r\n\r\n{"ok":true}'
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                writer.write(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        for sock in server.sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (Linux /proc), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(groups: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in groups.items()}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="executor threads per worker (1: on two cores, a second thread per process costs more in GIL "
        "contention than it gains; see bench/README.md)",
    )
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument(
        "--trigger",
        choices=["single", "bulk"],
        default="single",
        help="single: one start_run (one transaction) per run, as API calls; "
        "bulk: start_runs in batches (enrolling a list)",
    )
    parser.add_argument("--batch", type=int, default=200, help="runs per start_runs call with --trigger bulk")
    parser.add_argument(
        "--clients", type=int, default=1, help="with --trigger single: threads starting runs at once, as API clients"
    )
    parser.add_argument("--keep-db", action="store_true", help="do not drop the database at the end")
    parser.add_argument(
        "--workload",
        choices=["linear", "graph"],
        default="linear",
        help="linear: add_tag, update_contact, webhook; graph: add_tag, branch, split, update_contact, webhook",
    )
    args = parser.parse_args()

    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    ports = multiprocessing.get_context("fork").Queue()
    server = multiprocessing.get_context("fork").Process(target=serve_webhooks, args=(ports,), daemon=True)
    server.start()
    webhook_url = f"http://127.0.0.1:{ports.get(timeout=10)}/hook"

    recreate_database(url)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-secret-key",
        "LOG_LEVEL": "WARNING",  # the worker logs every job at INFO; a benchmark measures the work, not the log
        "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        "JOB_POLL_INTERVAL": "0.2",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(
        {k: env[k] for k in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "LOG_LEVEL", "WEBHOOK_ALLOWED_HOSTS")}
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from django.db import connection

    from accounts.models import Account
    from contacts.models import Contact
    from workflows.application.runs.starting import start_run, start_runs
    from workflows.application.workflows import WorkflowService
    from workflows.models import ExecutionLog, WorkflowExecution

    total = args.runs + args.warmup
    account = Account.objects.create(
        name="Bench", slug="bench", max_concurrent_executions=total + 100, max_concurrent_jobs=1000
    )
    Contact.objects.bulk_create(
        Contact(account=account, email=f"c{i}@example.com", first_name=f"C{i}") for i in range(total)
    )
    contacts = list(Contact.objects.filter(account=account).order_by("id").values_list("id", flat=True))
    workflows = WorkflowService()
    steps, described = workload(args.workload, webhook_url)
    per_run = 5 if args.workload == "graph" else 3
    workflow = workflows.create(
        account_id=account.pk, name=f"Bench: {described}", trigger={"type": "api"}, reenrollment="always", steps=steps
    )
    workflows.publish(workflow_id=workflow.pk)

    workers = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "runworker", "--concurrency", str(args.concurrency)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL if not os.environ.get("BENCH_WORKER_OUTPUT") else None,
            stderr=subprocess.STDOUT if not os.environ.get("BENCH_WORKER_OUTPUT") else None,
            start_new_session=True,
        )
        for _ in range(args.workers)
    ]
    try:
        # Warm-up: workers connect, import, and cache the version.
        for contact_id in contacts[: args.warmup]:
            start_run(workflow_id=workflow.pk, contact_id=contact_id, trigger_data={"i": -1})
        wait_for(lambda: WorkflowExecution.objects.filter(status="completed").count() >= args.warmup, 60)

        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            backends = [pid for (pid,) in cursor.fetchall()]
        groups = {
            "workers": [w.pid for w in workers],
            "PostgreSQL (this database's backends)": backends,
            "trigger (this process)": [os.getpid()],
            "webhook server": [server.pid],
        }
        cpu_before = cpu_snapshot(groups)
        measured = contacts[args.warmup :]
        started = time.time()
        if args.trigger == "single":
            start_one_by_one(workflow.pk, measured, args.clients)
        else:
            for start in range(0, len(measured), args.batch):
                batch = measured[start : start + args.batch]
                start_runs(workflow_id=workflow.pk, contact_ids=batch, trigger_data={"i": start})
        triggered = time.time()
        done = wait_for(
            lambda: WorkflowExecution.objects.filter(status__in=["completed", "failed"]).count() >= total, 600
        )
        finished = time.time()
        cpu_after = cpu_snapshot(groups)
        if not done:
            print("timed out waiting for the runs to finish", file=sys.stderr)

        rows = list(
            WorkflowExecution.objects.filter(contact_id__in=measured).values_list(
                "status", "created_at", "completed_at"
            )
        )
        completed = [(c, e) for status, c, e in rows if status == "completed" and e]
        latencies = [(e - c).total_seconds() * 1000 for c, e in completed]
        first = min(c for _, c, _ in rows)
        last = max(e for _, e in completed)
        span = (last - first).total_seconds()
        logs = ExecutionLog.objects.filter(execution__contact_id__in=measured).count()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM jobs_job WHERE status <> 'completed'")
            unfinished_jobs = cursor.fetchone()[0]

        print()
        print(f"Workflow throughput: {args.runs} runs x {per_run} steps ({described})")
        cores = os.cpu_count()
        print(f"  {args.workers} runworker processes x {args.concurrency} executor threads, PostgreSQL, {cores} cores")
        print(f"  completed runs      {len(completed)} / {args.runs}   (failed or stuck: {args.runs - len(completed)})")
        print(f"  step log rows       {logs} (expected {per_run * args.runs})   unfinished jobs: {unfinished_jobs}")
        how = (
            f"one transaction each, {args.clients} client(s)"
            if args.trigger == "single"
            else f"start_runs, {args.batch} per transaction"
        )
        print(f"  trigger rate        {args.runs / (triggered - started):.0f} starts/s ({how})")
        print(f"  runs/s              {len(completed) / span:.0f}   (first start to last completion: {span:.2f} s)")
        print(f"  steps/s             {per_run * len(completed) / span:.0f}")
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        print(f"  trigger->COMPLETED  p50 {p50:.0f} ms   p99 {p99:.0f} ms")
        print(f"  wall time waiting   {finished - started:.2f} s")
        print("  CPU per run, by process group (ms):")
        for name in groups:
            used = cpu_after[name] - cpu_before[name]
            print(f"    {name:40s} {1000 * used / args.runs:6.2f}")
        print(
            f"    {'all of the above':40s} {1000 * sum(cpu_after[n] - cpu_before[n] for n in groups) / args.runs:6.2f}"
        )
        print()
        print(
            "Rerun: .venv/bin/python bench/workflow_throughput.py "
            f"--runs {args.runs} --workers {args.workers} --concurrency {args.concurrency} --trigger {args.trigger}"
            f" --workload {args.workload}"
            + (f" --batch {args.batch}" if args.trigger == "bulk" else f" --clients {args.clients}")
        )
        return 0 if len(completed) == args.runs else 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        server.terminate()
        connection.close()
        if not args.keep_db:
            drop_database(url)


def workload(name: str, webhook_url: str) -> tuple[list[dict], str]:
    """The steps of the workflow each run goes through, and how the report names them."""
    if name == "linear":
        return [
            {"name": "Tag", "action_type": "add_tag", "config": {"tag": "bench"}},
            {
                "name": "Score",
                "action_type": "update_contact",
                "config": {"custom_fields": {"score": "{{ trigger.i }}"}},
            },
            {"name": "Notify", "action_type": "webhook", "config": {"url": webhook_url}},
        ], "add_tag, update_contact, webhook"
    tagged = [{"field": "tags", "op": "contains", "value": "bench"}]
    return [
        {"key": "tag", "action_type": "add_tag", "config": {"tag": "bench"}},
        {
            "key": "check",
            "action_type": "branch",
            "config": {"branches": [{"name": "Tagged", "conditions": tagged, "next": "ab"}], "default": "$end"},
        },
        {
            "key": "ab",
            "action_type": "split",
            "config": {"paths": [{"name": "A", "weight": 50, "next": "a"}, {"name": "B", "weight": 50, "next": "b"}]},
        },
        {"key": "a", "action_type": "update_contact", "config": {"custom_fields": {"path": "a"}}, "next": "notify"},
        {"key": "b", "action_type": "update_contact", "config": {"custom_fields": {"path": "b"}}},
        {"key": "notify", "action_type": "webhook", "config": {"url": webhook_url}},
    ], "add_tag, branch, split, update_contact, webhook"


def start_one_by_one(workflow_id: int, contact_ids: list[int], clients: int) -> None:
    """Each client thread starts its share of the runs, one start_run (transaction) each."""
    from django.db import connection

    from workflows.application.runs.starting import start_run

    def client(share: list[int]) -> None:
        try:
            for i, contact_id in enumerate(share):
                start_run(workflow_id=workflow_id, contact_id=contact_id, trigger_data={"i": i})
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(contact_ids[n::clients],)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


if __name__ == "__main__":
    sys.exit(main())
