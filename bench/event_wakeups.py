#!/usr/bin/env python
"""Event wake-ups: N runs waiting in a `wait_for_event` step, woken by N events posted through the API.

The workflow: wait for `order.paid` (timeout one day), then add a tag. The
script creates its own database (`relay_bench_events` by default), starts two
`runworker` processes, starts N runs (start_runs) and waits until every one
is WAITING. Optionally (`--background B`) B more runs wait on other events
(spread over other contacts and other event names, each with its timeout's
job due tomorrow), inserted directly, so the wait index and the job table
hold them. Then it posts N `order.paid` events through the REST API
(`POST /api/v1/events`, Django's test client in this process: the whole API
stack, authentication, the view, the event's transaction), one per waiting
run, as fast as it can or at `--rate` events/s, and reports:

- events/s: from the first event's commit to the last woken run's next step start;
- p50/p99 of wake-up latency: from the event's stored time (taken inside its transaction, just before
  the commit: a slight over-estimate) to the start of the step after the wait (its log row's started_at).

    .venv/bin/python bench/event_wakeups.py [--runs 2000] [--background 100000] [--rate 0] [--workers 2]

BENCH_DATABASE_URL overrides the database (it is dropped and created again).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

# bench/ is sys.path[0] when a script here runs; mypy sees the tree from the root, so it cannot resolve it
from workflow_throughput import drop_database, recreate_database  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/relay_bench_events"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--background", type=int, default=0, help="runs waiting on other events")
    parser.add_argument("--rate", type=float, default=0, help="events per second to post; 0: as fast as possible")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    url = os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL)
    recreate_database(url)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-secret-key",
        "LOG_LEVEL": "WARNING",
        "JOB_POLL_INTERVAL": "1.0",
        "API_THROTTLE_RATE": "",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "DEBUG", "SECRET_KEY", "LOG_LEVEL", "API_THROTTLE_RATE")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS = ["*"]

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from accounts.application.tokens import api_token_create
    from accounts.models import Account, Membership
    from contacts.models import Contact, Event
    from workflows.application.runs.starting import start_runs
    from workflows.application.workflows import WorkflowService
    from workflows.infrastructure.models import EventWait, ExecutionLog, WorkflowExecution

    account = Account.objects.create(
        name="Bench", slug="bench", max_concurrent_executions=args.runs + 100, max_concurrent_jobs=1000
    )
    user = get_user_model().objects.create_user("bench")
    Membership.objects.create(user=user, account=account, role="owner")
    _, secret = api_token_create(user_id=user.pk, account_id=account.pk, name="bench")
    Contact.objects.bulk_create(Contact(account=account, email=f"c{i}@example.com") for i in range(args.runs))
    contacts = list(Contact.objects.filter(account=account).order_by("id").values_list("id", flat=True))
    service = WorkflowService()
    workflow = service.create(
        account_id=account.pk,
        name="Bench: wait for the order, then tag",
        trigger={"type": "api"},
        reenrollment="always",
        steps=[
            {
                "key": "wait_paid",
                "action_type": "wait_for_event",
                "config": {"event": "order.paid", "timeout": "1 day", "on_timeout": "$end"},
                "next": "tag_paid",
            },
            {"key": "tag_paid", "action_type": "add_tag", "config": {"tag": "paid"}},
        ],
    )
    service.publish(workflow_id=workflow.pk)

    if args.background:  # on a workflow of their own, so that only the measured runs are counted
        other = service.create(
            account_id=account.pk,
            name="Bench: other waits",
            trigger={"type": "api"},
            reenrollment="always",
            steps=[
                {
                    "key": "wait_paid",
                    "action_type": "wait_for_event",
                    "config": {"event": "other.event", "timeout": "1 day", "on_timeout": "$end"},
                }
            ],
        )
        insert_background(args.background, account, other, service.publish(workflow_id=other.pk), contacts)

    workers = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "runworker", "--concurrency", "1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(args.workers)
    ]
    try:
        for start in range(0, len(contacts), 500):
            start_runs(workflow_id=workflow.pk, contact_ids=contacts[start : start + 500])
        measured = WorkflowExecution.objects.filter(workflow=workflow)
        if not wait_for(lambda: measured.filter(status="waiting").count() >= args.runs, 600):
            print("timed out waiting for the runs to wait", file=sys.stderr)
            return 1
        waits = EventWait.objects.count()
        api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
        interval = 1 / args.rate if args.rate else 0
        posted_at = time.perf_counter()
        next_at = posted_at
        for contact_id in contacts:
            if interval:
                now = time.perf_counter()
                if now < next_at:
                    time.sleep(next_at - now)
                next_at += interval
            response = api.post(
                "/api/v1/events",
                {"name": "order.paid", "contact": contact_id, "data": {"total": 1}},
                "application/json",
            )
            if response.status_code != 200:
                print(f"POST /events answered {response.status_code}: {response.content[:200]!r}", file=sys.stderr)
                return 1
        post_seconds = time.perf_counter() - posted_at
        done = wait_for(lambda: measured.filter(status="completed").count() >= args.runs, 600)
        if not done:
            print("timed out waiting for the runs to complete", file=sys.stderr)
        events = dict(
            Event.objects.filter(contact_id__in=contacts, name="order.paid").values_list("contact_id", "occurred_at")
        )
        steps = dict(
            ExecutionLog.objects.filter(execution__contact_id__in=contacts, step_key="tag_paid").values_list(
                "execution__contact_id", "started_at"
            )
        )
        latencies = [(steps[c] - events[c]).total_seconds() * 1000 for c in contacts if c in steps and c in events]
        first, last = min(events.values()), max(steps.values())
        span = (last - first).total_seconds()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM jobs_job WHERE status = 'pending'")
            pending_jobs = cursor.fetchone()[0]

        print()
        print(f"Event wake-ups: {args.runs} runs waiting in wait_for_event, woken by {args.runs} events (POST /events)")
        print(f"  {args.workers} runworker processes, PostgreSQL, {os.cpu_count()} cores")
        print(f"  other runs waiting  {args.background} (on other events; event waits stored: {waits})")
        print(f"  pending jobs after  {pending_jobs} (the background waits' timeouts)")
        rate = f"{args.rate:.0f}/s paced" if args.rate else "as fast as one client posts"
        print(f"  posting             {args.runs / post_seconds:.0f} events/s ({rate})")
        print(f"  woken runs          {len(latencies)} / {args.runs}")
        print(
            f"  events/s            {len(latencies) / span:.0f}   (first event to last next step start: {span:.2f} s)"
        )
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        print(f"  event -> next step  p50 {p50:.1f} ms   p99 {p99:.1f} ms   max {max(latencies):.1f} ms")
        print()
        print(
            f"Rerun: .venv/bin/python bench/event_wakeups.py --runs {args.runs} --background {args.background} "
            f"--rate {args.rate:g} --workers {args.workers}"
        )
        return 0 if len(latencies) == args.runs else 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        connection.close()
        if not args.keep_db:
            drop_database(url)


def insert_background(count: int, account, workflow, version, measured: list[int]) -> None:
    """`count` runs waiting on other events, with their timeouts' jobs due tomorrow: the load the index and
    the job table carry in production. Half wait on the measured contacts (for other event names), half on
    other contacts. Inserted directly (starting them through workers would take long); they are WAITING rows
    like any other."""
    from django.conf import settings
    from django.utils import timezone

    from contacts.models import Contact
    from jobs.application.queue import JobSpec, enqueue_many
    from workflows.infrastructure.models import EventWait, WorkflowExecution

    per_contact = 10
    Contact.objects.bulk_create(
        (Contact(account=account, email=f"bg{i}@example.com") for i in range(count // per_contact + 1)),
        batch_size=5000,
    )
    others = list(Contact.objects.filter(email__startswith="bg").order_by("id").values_list("id", flat=True))
    tomorrow = timezone.now() + timedelta(days=1)
    for start in range(0, count, 5000):
        chunk = range(start, min(count, start + 5000))
        runs = WorkflowExecution.objects.bulk_create(
            WorkflowExecution(
                account=account,
                workflow=workflow,
                version=version,
                contact_id=measured[(i // 2) % len(measured)] if i % 2 == 0 else others[i // per_contact],
                status="waiting",
                current_step_key="wait_paid",
                step_count=1,
                resume_at=tomorrow,
                context={"event": "", "trigger": {}, "steps": [], "step_keys": [], "path": ["wait_paid"]},
            )
            for i in chunk
        )
        jobs = enqueue_many(
            JobSpec(
                "workflow_resume",
                {"execution_id": str(run.pk)},
                queue=settings.WORKFLOW_QUEUE,
                run_at=tomorrow,
                account=account.pk,
            )
            for run in runs
        )
        for run, job in zip(runs, jobs, strict=True):
            run.next_job_id = job
        WorkflowExecution.objects.bulk_update(runs, ["next_job_id"])
        EventWait.objects.bulk_create(
            EventWait(
                execution_id=run.pk,
                account_id=account.pk,
                contact_id=run.contact_id,
                event=f"other.event{i % 7}",
                match={},
                step_key="wait_paid",
                timeout_at=tomorrow,
            )
            for i, run in zip(chunk, runs, strict=True)
        )


if __name__ == "__main__":
    sys.exit(main())
