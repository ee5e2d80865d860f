#!/usr/bin/env python
"""What the sending rules cost a send (issue 23 section 6): throughput with every rule on against none.

Each arm drains N sends to a real local SMTP server (aiosmtpd, its own process) with two `runworker`
processes, and reports sends/s over the steady part of the drain:

- `none`: the account has no sending settings (email has no default window, no cap): the door still reads
  the contact under its lock, asks consent and address, and writes its ledger row;
- `rules`: every rule on and none binding: an email window open now (every day 00:00-24:00 in the contact's
  zone, so the zone is resolved: the contacts have none, the account's is read), two frequency caps far from
  reached (1,000 marketing messages a calendar day on all channels, 500 emails per rolling 24 hours),
  consent given (every contact subscribed). Suppression: the door's list is empty today
  (`outbound._suppressed` returns no entries until the deliverability issue fills it), so it costs nothing
  on either side; this bench cannot make it non-empty;
- `base:none`: `--base DIR`, a checkout of the commit before the door (05bee36), same workload, no rules
  (it has none).

`--path job` (default): N `send_email` jobs (the built-in job, through the door on this code).
`--path workflow`: N runs of a one-step workflow (`send_email`); the report says how many ledger rows were
written, which shows whether the workflow's step went through the door on the code measured.

The arms are interleaved, round by round (base, none, rules, ...), each in its own child process and its own
database (`h_sendbench_head`, `h_sendbench_base`; BENCH_PG_URL overrides the server). After the rounds, one
send is made in-process with every rule on and its statements counted (CaptureQueriesContext), and the cap
statement is EXPLAINed (ANALYZE, rolled back) on the ledger the last `rules` arm left.

    .venv/bin/python bench/sending_rules.py [--rounds 3] [--n 3000] [--path job|workflow] [--base /work/wt/base]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
RULES: dict[str, Any] = {
    "send_windows": {"email": {"days": ["mon-sun"], "hours": ["00:00-24:00"]}},
    "frequency_caps": [{"max": 1000, "days": 1}, {"max": 500, "hours": 24, "channel": "email"}],
}


def serve_smtp(port_queue: Any) -> None:
    """An SMTP server that accepts every message and keeps nothing (a receiver, as production's relay)."""
    from aiosmtpd.controller import Controller

    class Sink:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            return "250 OK"

    import socket

    with socket.socket() as probe:  # a free port (aiosmtpd's own start-up check cannot use port 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(Sink(), hostname="127.0.0.1", port=port)
    controller.start()
    port_queue.put(port)
    signal.sigwait({signal.SIGTERM})
    controller.stop()


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def cpu_of(pids: list[int]) -> float:
    """utime + stime of these processes, seconds (Linux /proc; a process gone counts 0)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


# --- a child: one arm, in the checkout given by --code --------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    """One arm in this process: Django of `--code`, its database migrated and emptied, N sends drained."""
    root = Path(args.code).resolve()
    sys.path.insert(0, str(root))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from accounts.models import Account
    from contacts.models import Contact

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE accounts_account, jobs_job CASCADE")
        cursor.execute("VACUUM ANALYZE jobs_job")
    account = Account.objects.create(
        name="Bench", slug="bench", max_concurrent_executions=args.n + 100, max_concurrent_jobs=1000
    )
    Contact.objects.bulk_create(
        Contact(account=account, email=f"c{i}@example.com", first_name=f"C{i}") for i in range(args.n)
    )
    contacts = list(Contact.objects.filter(account=account).order_by("id").values_list("id", flat=True))
    if args.mode == "rules":
        from integrations.application.sending_rules import sending_settings_set

        sending_settings_set(account_id=account.pk, **RULES)
    queued = time.time()
    if args.path == "job":
        from jobs.application.queue import JobSpec, enqueue_many

        enqueue_many(
            JobSpec(
                "send_email",
                {"to": f"c{i}@example.com", "subject": "Hello", "text": "Hi!", "account": account.pk, "contact": cid},
                account=account,
            )
            for i, cid in enumerate(contacts)
        )
    else:
        from workflows.application.runs.starting import start_runs
        from workflows.application.workflows import WorkflowService

        service = WorkflowService()
        steps = [{"name": "Mail", "action_type": "send_email", "config": {"subject": "Hello", "text": "Hi!"}}]
        workflow = service.create(
            account_id=account.pk, name="Bench: send_email", trigger={"type": "api"}, reenrollment="always", steps=steps
        )
        service.publish(workflow_id=workflow.pk)
        for start in range(0, len(contacts), 500):
            start_runs(workflow_id=workflow.pk, contact_ids=contacts[start : start + 500], trigger_data={})
    env = {**os.environ, "LOG_LEVEL": "WARNING", "DEBUG": "false", "PYTHONPATH": str(root)}
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "--concurrency", "1"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(2)
    ]
    try:
        table, done = (
            ("jobs_job", "status = 'completed'")
            if args.path == "job"
            else ("workflows_workflowexecution", "status IN ('completed', 'failed')")
        )
        deadline = time.monotonic() + 900
        cpu_from: tuple[float, float, int] | None = None  # (workers' CPU, their backends' CPU, done) at 10 %
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {table} WHERE {done}")
                finished = cursor.fetchone()[0]
                if cpu_from is None and finished >= args.n // 10:
                    cursor.execute(
                        "SELECT pid FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                    backends = [pid for (pid,) in cursor.fetchall()]
                    cpu_from = (cpu_of([w.pid for w in workers]), cpu_of(backends), finished)
                if finished >= args.n:
                    break
            time.sleep(0.2)
        cpu_to = (cpu_of([w.pid for w in workers]), cpu_of(backends)) if cpu_from is not None else (0.0, 0.0)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT completed_at FROM {table} WHERE completed_at IS NOT NULL ORDER BY completed_at")
            times = [row[0].timestamp() for row in cursor.fetchall()]
            cursor.execute(f"SELECT count(*) FROM {table} WHERE status = 'completed'")
            completed = cursor.fetchone()[0]
            cursor.execute("SELECT count(*) FROM pg_class WHERE relname = 'integrations_outbound_message'")
            has_ledger = cursor.fetchone()[0] == 1
            ledger = 0
            if has_ledger:
                cursor.execute("SELECT count(*) FROM integrations_outbound_message WHERE status = 'sent'")
                ledger = cursor.fetchone()[0]
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
    sends = max(1, args.n - cpu_from[2]) if cpu_from else 1
    worker_ms = 1000 * (cpu_to[0] - cpu_from[0]) / sends if cpu_from else 0.0
    db_ms = 1000 * (cpu_to[1] - cpu_from[1]) / sends if cpu_from else 0.0
    # Steady rate: from the 10th percentile of completions to the last (worker start-up left out).
    first = times[len(times) // 10] if times else 0.0
    steady = (len(times) - len(times) // 10) / (times[-1] - first) if len(times) > 10 else 0.0
    print(
        json.dumps(
            {
                "arm": args.arm_name,
                "sends_per_s": steady,
                "completed": completed,
                "ledger_sent": ledger,
                "wall_s": (times[-1] - queued) if times else 0.0,
                "worker_cpu_ms": worker_ms,
                "db_cpu_ms": db_ms,
            }
        ),
        flush=True,
    )


# --- statements per send and the cap statement's plan (this checkout) -------------------------------------


def statements(url: str, smtp_url: str) -> None:
    """One send with every rule on, its statements counted; the cap statement EXPLAINed on the last ledger."""
    os.environ.update({"DATABASE_URL": url, "EMAIL_URL": smtp_url, "LOG_LEVEL": "WARNING"})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(HERE))
    import django

    django.setup()
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from accounts.models import Account
    from contacts.models import Contact
    from integrations.application.outbound import Sent, send_message
    from integrations.application.sending_rules import sending_settings_set
    from integrations.domain.channels import EmailMessage

    account = Account.objects.get(slug="bench")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE integrations_outbound_message")
    for mode in ("none", "rules"):
        sending_settings_set(
            account_id=account.pk,
            send_windows=RULES["send_windows"] if mode == "rules" else {},
            frequency_caps=RULES["frequency_caps"] if mode == "rules" else [],
        )
        contact = Contact.objects.create(account=account, email=f"probe-{mode}@example.com")
        counts = []
        for attempt in range(3):  # the first pays for the connection's first use of each statement
            with CaptureQueriesContext(connection) as captured:
                outcome = send_message(
                    key=f"probe_{mode}_{attempt}",
                    content=EmailMessage(to=contact.email, subject="Hello", text="Hi!"),
                    account_id=account.pk,
                    contact_id=contact.pk,
                )
            assert isinstance(outcome, Sent), outcome
            counts.append(captured.captured_queries)
        queries = counts[-1]
        caps = [q["sql"] for q in queries if "count(*)" in q["sql"].lower() and "outbound_message" in q["sql"]]
        print(f"\nOne send, rules {mode}: {len(queries)} statements issued by the door (third send to one contact):")
        for query in queries:
            sql = " ".join(query["sql"].split())
            print(f"    {sql[:150]}{'...' if len(sql) > 150 else ''}")
        if mode == "rules":
            inserts = [q for q in caps if q.lstrip().upper().startswith("INSERT")]
            print(
                f"\n  cap check = {len(caps)} indexed statement(s) per send"
                f" ({len(inserts)} of them the ledger's own INSERT, which counts both caps in its WHERE:"
                " no read before the write)"
            )
            if caps:
                with transaction.atomic(), connection.cursor() as cursor:
                    fresh = caps[0].replace(f"'probe_{mode}_2'", f"'probe_{mode}_explain'")  # a new message's key
                    cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + fresh)
                    plan = [row[0] for row in cursor.fetchall()]
                    transaction.set_rollback(True)
                print("\n  EXPLAIN ANALYZE of the cap statement (rolled back):")
                for line in plan:
                    print(f"    {line}")
                uses = any("outbound_contact_recent" in line for line in plan)
                print(f"  uses the ledger index outbound_contact_recent: {'yes' if uses else 'NO'}")
    connection.close()


# --- the driver ------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=3000, help="sends per arm")
    parser.add_argument("--path", choices=["job", "workflow"], default="job")
    parser.add_argument("--base", default="", help="a checkout of the commit before (e.g. /work/wt/base: 05bee36)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=["none", "rules"], default="none", help=argparse.SUPPRESS)
    parser.add_argument("--code", default=str(HERE), help=argparse.SUPPRESS)
    parser.add_argument("--arm-name", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    ports: Any = multiprocessing.get_context("fork").Queue()
    smtp = multiprocessing.get_context("fork").Process(target=serve_smtp, args=(ports,), daemon=True)
    smtp.start()
    smtp_url = f"smtp://127.0.0.1:{ports.get(timeout=10)}"
    arms = [("head:none", HERE, "none", "h_sendbench_head"), ("head:rules", HERE, "rules", "h_sendbench_head")]
    if args.base:
        arms.insert(0, ("base:none", Path(args.base).resolve(), "none", "h_sendbench_base"))
    for db in {arm[3] for arm in arms}:
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin(f'CREATE DATABASE "{db}"')
    results: list[dict[str, Any]] = []
    try:
        for round_no in range(1, args.rounds + 1):
            order = arms if round_no % 2 else [*arms[::-1]]  # ABC, CBA, ...: no arm always runs first
            for name, code, mode, db in order:
                env = {
                    **os.environ,
                    "DATABASE_URL": f"{SERVER}/{db}",
                    "EMAIL_URL": smtp_url,
                    "SECRET_KEY": "bench-only-secret-key",
                    "DEBUG": "false",
                    "LOG_LEVEL": "WARNING",
                    "JOB_POLL_INTERVAL": "0.2",
                    "PYTHONPATH": str(code),
                }
                command = [sys.executable, __file__, "--child", "--mode", mode, "--code", str(code)]
                command += ["--n", str(args.n), "--path", args.path, "--arm-name", name]
                out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(out.stdout, out.stderr, file=sys.stderr)
                    raise SystemExit(f"arm {name} failed")
                result = json.loads(out.stdout.strip().splitlines()[-1])
                result["round"] = round_no
                print(json.dumps(result), flush=True)
                results.append(result)
        # the last head arm left its N ledger rows (one per contact): the plan is read on a table of that size
        statements(f"{SERVER}/h_sendbench_head", smtp_url)
    finally:
        smtp.terminate()
    print(f"\nSending rules ({args.path} path), {args.n} sends per arm, 2 runworker x 1, {args.rounds} rounds:")
    medians: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name, *_ in arms:
        mine = [r for r in results if r["arm"] == name]
        values = [r["sends_per_s"] for r in mine]
        medians[name] = statistics.median(values)
        ledger = statistics.median(r["ledger_sent"] for r in mine)
        worker = statistics.median(r["worker_cpu_ms"] for r in mine)
        backend = statistics.median(r["db_cpu_ms"] for r in mine)
        cpu[name] = worker + backend
        listed = ", ".join(f"{v:,.0f}" for v in values)
        print(
            f"  {name:11s} median {medians[name]:7,.0f} sends/s [{listed}]   CPU ms per send: workers {worker:.2f}"
            f" + their PostgreSQL backends {backend:.2f}   ledger rows sent: {ledger:,.0f}"
        )
    print(
        f"  rules on / none (this code):  {medians['head:rules'] / medians['head:none']:.1%} of the throughput,"
        f" {cpu['head:rules'] / cpu['head:none']:.1%} of the CPU per send"
    )
    if "base:none" in medians:
        print(
            f"  rules on / none at {args.base}:  {medians['head:rules'] / medians['base:none']:.1%} of the"
            f" throughput, {cpu['head:rules'] / cpu['base:none']:.1%} of the CPU per send"
        )
        print(
            f"  none (this code) / none at base:  {medians['head:none'] / medians['base:none']:.1%} of the"
            f" throughput, {cpu['head:none'] / cpu['base:none']:.1%} of the CPU per send"
        )
    rerun = f".venv/bin/python bench/sending_rules.py --rounds {args.rounds} --n {args.n} --path {args.path}"
    print(f"Rerun: {rerun}" + (f" --base {args.base}" if args.base else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
