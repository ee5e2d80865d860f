#!/usr/bin/env python
"""A send window opening that releases a backlog of deferred sends (issue 23 section 6).

The backlog is left as the door leaves it: `--size` `send_email` jobs (the built-in job, the same handler),
pending, snoozed once (`snoozes = 1`, attempt 0), each due at the window's opening plus its spread offset
(`integrations.domain.sending.windows.spread_offset` of its key `job_<id>`, the function the door's window
rule uses), with its ledger row `deferred` until then; spread over `--accounts` accounts whose email window
opens at that minute (every day, HH:MM-24:00 UTC, `spread` = `--spread` seconds). They are written in bulk
(the queue's own insert, so lanes and limits are as enqueue makes them), not by running the door N times.

Then two real `runworker` processes (concurrency 1 each) start before the opening, and another account enqueues
an ordinary job (`noop`, one per transaction) every `--gap` seconds from before the opening until the backlog
is sent. Every released job asks the door again (window open now: Send) and sends to a local SMTP server
(aiosmtpd, its own process). Reported:

- the release rate: sends per second from the opening to the last send (the ledger's `sent_at`, the database's
  clock), and the workers' lag behind the schedule (job start - due time, p50/p95/max);
- the other account's pickup latency (its jobs' `started_at - created_at`, the database's clock) before the
  opening (idle) and during the release: p50/p95/max;
- bursts: the most sends in any one second and any one minute, against what the spread schedules (the most
  jobs due in any one second and minute; `size / spread` on average).

    .venv/bin/python bench/window_release.py [--size 10000] [--accounts 50] [--spread 60] [--gap 1.0]

It creates (and drops, unless --keep-db) the database `h_sendbench_release` (BENCH_PG_URL: the server).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from bench.sending_rules import SERVER, admin, percentile, serve_smtp  # noqa: E402

DB = "h_sendbench_release"


def create_backlog(size: int, accounts: int, spread: int, lead: float) -> tuple[datetime, int, list[int]]:
    """Accounts, contacts and the deferred jobs and ledger rows; returns (the opening, the other account, ids)."""
    from django.db import connection

    from accounts.models import Account
    from contacts.models import Contact
    from integrations.application.sending_rules import sending_settings_set
    from integrations.domain.sending.windows import spread_offset
    from jobs.application.queue import JobSpec, get_store, prepare_job, queue_database
    from kernel import clock

    ids = [
        Account.objects.create(
            name=f"Sender {n}", slug=f"sender-{n}", max_concurrent_executions=1000, max_concurrent_jobs=1000
        ).pk
        for n in range(accounts)
    ]
    other = Account.objects.create(name="Other", slug="other", max_concurrent_jobs=1000).pk
    per = -(-size // accounts)
    for n, account_id in enumerate(ids):
        Contact.objects.bulk_create(
            (
                Contact(account_id=account_id, email=f"a{n}c{i}@example.com", first_name=f"C{i}")
                for i in range(min(per, size - n * per))
            ),
            batch_size=5000,
        )
    contacts = list(Contact.objects.filter(account_id__in=ids).values_list("id", "account_id", "email"))
    # The opening: the first whole minute after the jobs can be written (about 1,000 a second here) plus `lead`.
    now = clock.now()
    opening = (now + timedelta(seconds=lead + size / 1000 + 60)).replace(second=0, microsecond=0)
    if (
        opening.date() != now.date()
        or (opening.replace(hour=0, minute=0) + timedelta(days=1) - opening).seconds < spread
    ):
        raise SystemExit("too close to midnight UTC for an opening that lasts the spread: run again later")
    window = {"days": ["mon-sun"], "hours": [f"{opening:%H:%M}-24:00"], "spread": spread}
    for account_id in ids:
        sending_settings_set(account_id=account_id, send_windows={"email": window})
    end = opening.replace(hour=0, minute=0) + timedelta(days=1)
    length = min(spread, (end - opening).total_seconds())
    store = get_store(queue_database())
    for start in range(0, len(contacts), 5000):
        rows = []
        for contact_id, account_id, email in contacts[start : start + 5000]:
            payload = {"to": email, "subject": "Hello", "text": "Hi!", "account": account_id, "contact": contact_id}
            row = prepare_job(JobSpec("send_email", payload, account=account_id, run_at=opening))
            rows.append(replace(row, run_at=opening + spread_offset(f"job_{row.id}", length)))
        store.insert(rows)
    reason = f"waiting for the send window (opens {opening:%a %d %b %H:%M} UTC)"
    with connection.cursor() as cursor:
        cursor.execute("UPDATE jobs_job SET snoozes = 1 WHERE handler = 'send_email'")
        cursor.execute(
            """
            INSERT INTO integrations_outbound_message
              (account_id, contact_id, channel, purpose, address, idempotency_key, workflow_id, version_id, run_id,
               step_key, split_path, job_id, status, history, provider, provider_message_id, provider_calls, rule,
               code, reason, deferred_until, error, created_at, updated_at)
            SELECT j.account_id, (j.payload->>'contact')::bigint, 'email', 'marketing', j.payload->>'to',
                   'job_' || j.id, NULL, NULL, NULL, '', '', j.id, 'deferred',
                   jsonb_build_array(jsonb_build_object('status', 'deferred', 'at', now(), 'detail', %s::text)),
                   '', '', 0, 'send_window', '', %s, j.run_at, '', now(), now()
            FROM jobs_job j WHERE j.handler = 'send_email'
            """,
            [reason, reason],
        )
        cursor.execute("VACUUM ANALYZE jobs_job")
        cursor.execute("ANALYZE integrations_outbound_message")
    return opening, other, ids


def feed_other(account_id: int, gap: float, stop: threading.Event) -> None:
    """The other account's ordinary jobs, one per transaction, every `gap` seconds."""
    from django.db import connection

    from jobs.application.queue import enqueue

    try:
        i = 0
        while not stop.is_set():
            enqueue("noop", {"i": i}, account=account_id)
            i += 1
            time.sleep(gap)
    finally:
        connection.close()


def per_bucket(times: list[datetime], seconds: int) -> Counter[int]:
    return Counter(int(t.timestamp()) // seconds for t in times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10000, help="deferred sends released at the opening")
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--spread", type=int, default=60, help="the window's spread, seconds (at most 3,600)")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between the other account's jobs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    ports: Any = multiprocessing.get_context("fork").Queue()
    smtp = multiprocessing.get_context("fork").Process(target=serve_smtp, args=(ports,), daemon=True)
    smtp.start()
    url = f"{SERVER}/{DB}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "EMAIL_URL": f"smtp://127.0.0.1:{ports.get(timeout=10)}",
        "SECRET_KEY": "bench-only-secret-key",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "JOB_POLL_INTERVAL": "0.2",
        "PYTHONPATH": str(HERE),
    }
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    admin(f'CREATE DATABASE "{DB}"')
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from kernel import clock

    call_command("migrate", verbosity=0)
    built = time.monotonic()
    opening, other, _ = create_backlog(args.size, args.accounts, args.spread, lead=10)
    print(f"backlog of {args.size:,} deferred sends written in {time.monotonic() - built:.1f} s; opening {opening}")
    if clock.now() > opening - timedelta(seconds=5):
        raise SystemExit("the backlog took too long to write: the window opened before the workers started")
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "runworker", "--concurrency", "1"],
            cwd=HERE,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(args.workers)
    ]
    warm = clock.now() + timedelta(seconds=5)  # the workers' start-up is not the idle queue's latency
    stop = threading.Event()
    feeder = threading.Thread(target=feed_other, args=(other, args.gap, stop), daemon=True)
    feeder.start()
    try:
        deadline = time.monotonic() + (opening - clock.now()).total_seconds() + args.spread + 1200
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM integrations_outbound_message WHERE status = 'sent'")
                if cursor.fetchone()[0] >= args.size:
                    break
            time.sleep(0.5)
        time.sleep(1)
    finally:
        stop.set()
        feeder.join(10)
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        smtp.terminate()

    with connection.cursor() as cursor:
        cursor.execute("SELECT status, count(*) FROM integrations_outbound_message GROUP BY status ORDER BY status")
        statuses = dict(cursor.fetchall())
        cursor.execute("SELECT sent_at FROM integrations_outbound_message WHERE sent_at IS NOT NULL")
        sent = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT run_at, extract(epoch FROM started_at - run_at) FROM jobs_job WHERE handler = 'send_email'"
            " AND started_at IS NOT NULL"
        )
        rows = cursor.fetchall()
        due = [row[0] for row in rows]
        lag = [float(row[1]) * 1000 for row in rows]
        cursor.execute(
            "SELECT created_at, extract(epoch FROM started_at - created_at) FROM jobs_job"
            " WHERE account_id = %s AND started_at IS NOT NULL",
            [other],
        )
        others = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM jobs_job WHERE account_id = %s AND started_at IS NULL", [other])
        others_waiting = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*), sum(snoozes) FROM jobs_job WHERE handler = 'send_email' AND attempt_number > 1"
        )
        reattempted = cursor.fetchone()
    connection.close()
    if not args.keep_db:
        admin(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')

    last = sent[-1] if sent else opening
    release_s = (last - opening).total_seconds()
    before = sent and sent[0] < opening
    idle = [float(s) * 1000 for c, s in others if warm <= c < opening]
    during = [float(s) * 1000 for c, s in others if opening <= c <= last]
    sent_s, due_s = per_bucket(sent, 1), per_bucket(due, 1)
    sent_m, due_m = per_bucket(sent, 60), per_bucket(due, 60)

    def spread(values: list[float]) -> str:
        if not values:
            return "none"
        return (
            f"p50 {statistics.median(values):6.1f}  p95 {percentile(values, 0.95):6.1f}  max {max(values):7.1f} ms"
            f"  ({len(values)} jobs)"
        )

    print(
        f"\nWindow release: {args.size:,} deferred send_email jobs over {args.accounts} accounts,"
        f" spread {args.spread} s,"
    )
    print(f"  {args.workers} runworker x 1, SMTP to a local aiosmtpd, PostgreSQL, {os.cpu_count()} cores")
    print(f"  ledger rows by status    {statuses}   (sent before the opening: {'YES' if before else 'none'})")
    print(f"  jobs attempted twice     {reattempted[0]}")
    print(
        f"  release                  {len(sent):,} sent in {release_s:.1f} s from the opening:"
        f" {len(sent) / release_s:,.0f} sends/s"
    )
    print(
        f"  scheduled                {args.size / args.spread:,.0f} sends/s on average over the {args.spread} s spread"
    )
    print(f"  lag behind schedule      {spread(lag)}   (job start - its due time)")
    print(f"  other account, idle      {spread(idle)}   (from 5 s after the workers started to the opening)")
    print(f"  other account, release   {spread(during)}   (still waiting at the end: {others_waiting})")
    print(
        f"  most in one second       sent {max(sent_s.values(), default=0):,}"
        f"   scheduled (due) {max(due_s.values(), default=0):,}"
    )
    print(
        f"  most in one minute       sent {max(sent_m.values(), default=0):,}"
        f"   scheduled (due) {max(due_m.values(), default=0):,}"
    )
    print(
        f"\nRerun: .venv/bin/python bench/window_release.py --size {args.size} --accounts {args.accounts}"
        f" --spread {args.spread} --gap {args.gap} --workers {args.workers}"
    )
    return 0 if len(sent) == args.size and not before else 1


if __name__ == "__main__":
    sys.exit(main())
