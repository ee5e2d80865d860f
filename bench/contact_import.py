#!/usr/bin/env python
"""A contact import of N rows (200,000 by default): time and peak memory of each step.

The script creates its own database (`relay_bench_import` by default; BENCH_DATABASE_URL overrides it; it is
dropped and created again), writes a CSV of N contacts (email, first and last name, phone, two tags, two
custom fields; `--existing E` of them already in the account, so they are updated), then measures, each in a
fresh process so that its peak resident memory is its own:

- upload: `import_upload` (what the admin's upload page calls: read and count every row, keep the header,
  a sample and the file), in a child process; its wall time and peak RSS (`ru_maxrss`);
- check: the `contacts.import` job in dry-run mode (every row read and checked, nothing written), run by a
  real `runworker` process: from the job's commit to the import's status `checked`, and the worker's peak
  RSS (`VmHWM`) against its RSS when idle before the job;
- import: the same job for real (every contact written in one transaction, with its events), likewise;
- the mapping page for a file of `--columns` columns (default 200): its size and render time.

    .venv/bin/python bench/contact_import.py [--rows 200000] [--existing 0] [--columns 200] [--keep-db]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench/ is sys.path[0] when a script here runs; mypy sees the tree from the root, so it cannot resolve it
from workflow_throughput import drop_database, recreate_database  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/relay_bench_import"
ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "bench-only-secret-key",
    "LOG_LEVEL": "WARNING",
    "JOB_POLL_INTERVAL": "0.2",
    "PYTHONUNBUFFERED": "1",
    "DJANGO_SETTINGS_MODULE": "config.settings",
}


def setup_django(url: str) -> None:
    os.environ.update({**ENV, "DATABASE_URL": url})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def write_csv(path: Path, rows: int) -> int:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Email", "First name", "Last name", "Phone", "Tags", "Plan type", "City"])
        for i in range(rows):
            writer.writerow(
                [
                    f"contact{i}@example.com",
                    f"First{i}",
                    f"Last{i}",
                    f"+1555{i:07d}",
                    f"list-{i % 7}, source-{i % 3}",
                    ("free", "pro", "team")[i % 3],
                    f"City {i % 500}",
                ]
            )
    return path.stat().st_size


def rss_kib(pid: int, key: str) -> int:
    """VmRSS / VmHWM of a process, in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def phase_upload(args: argparse.Namespace) -> None:
    """In a child process: import_upload of the file, printing one JSON line."""
    setup_django(args.url)
    from contacts.application.imports import import_upload

    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    content = Path(args.file).read_bytes()
    started = time.perf_counter()
    record = import_upload(account_id=args.account, filename="bench.csv", content=content)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"id": record.pk, "seconds": seconds, "rss_before": baseline, "rss_peak": peak}))


def run_job(url: str, import_id: int, *, dry_run: bool, done: str, timeout: float) -> dict[str, float]:
    """Start a runworker, queue the job, wait for the import's status; the worker's time and memory."""
    from contacts.application.imports import import_queue
    from contacts.infrastructure.models import ContactImport

    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runworker", "--concurrency", "1"],
        cwd=ROOT,
        env={**os.environ, **ENV, "DATABASE_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        time.sleep(3)  # started and idle
        idle = rss_kib(worker.pid, "VmRSS")
        started = time.perf_counter()
        import_queue(import_id=import_id, dry_run=dry_run)
        deadline = started + timeout
        status = ""
        while time.perf_counter() < deadline:
            status = ContactImport.objects.filter(pk=import_id).values_list("status", flat=True).get()
            if status in (done, "refused"):
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        peak = rss_kib(worker.pid, "VmHWM")
    finally:
        worker.terminate()
        worker.wait(30)
    if status != done:
        record = ContactImport.objects.get(pk=import_id)
        raise SystemExit(f"the import ended {status!r}, not {done!r}: {record.problems[:3]}")
    return {"seconds": seconds, "idle": idle, "peak": peak}


def mapping_page(account_id: int, columns: int) -> tuple[float, int]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from contacts.application.imports import import_upload

    header = ["Email", *(f"Field {i}" for i in range(columns - 1))]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    for i in range(8):
        writer.writerow([f"wide{i}@example.com", *(f"value {i}.{c}" for c in range(columns - 1))])
    record = import_upload(account_id=account_id, filename="wide.csv", content=buffer.getvalue().encode())
    admin = get_user_model().objects.create_superuser("bench-admin", "admin@example.com", "x")
    client = Client()
    client.force_login(admin)
    url = f"/admin/contacts/contact/import/{record.pk}/"
    client.get(url)  # templates compiled
    started = time.perf_counter()
    response = client.get(url)
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"the mapping page answered {response.status_code}")
    return seconds, len(response.content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--existing", type=int, default=0, help="contacts of the file already in the account")
    parser.add_argument("--columns", type=int, default=200, help="columns of the file for the mapping page")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--phase", choices=["upload"], help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--account", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "upload":
        phase_upload(args)
        return 0

    recreate_database(args.url)
    setup_django(args.url)
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    settings.ALLOWED_HOSTS = ["*"]
    from accounts.models import Account
    from contacts.models import Contact

    account = Account.objects.create(name="Bench", slug="bench", max_concurrent_jobs=100)
    if args.existing:
        Contact.objects.bulk_create(
            (Contact(account=account, email=f"contact{i}@example.com") for i in range(args.existing)), batch_size=5000
        )
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "bench.csv"
            size = write_csv(path, args.rows)
            child = subprocess.run(
                [sys.executable, __file__, "--phase", "upload", "--file", str(path), "--account", str(account.pk)],
                cwd=ROOT,
                env={**os.environ, "BENCH_DATABASE_URL": args.url},
                capture_output=True,
                text=True,
                check=False,
            )
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        upload = json.loads(child.stdout.strip().splitlines()[-1])
        check = run_job(args.url, upload["id"], dry_run=True, done="checked", timeout=args.timeout)
        imported = run_job(args.url, upload["id"], dry_run=False, done="imported", timeout=args.timeout)
        count = Contact.objects.filter(account=account).count()
        page_seconds, page_bytes = mapping_page(account.pk, args.columns)
    finally:
        if not args.keep_db:
            from django.db import connections

            connections.close_all()
            drop_database(args.url)

    mib = 1024
    print()
    print(f"Contact import: {args.rows:,} rows ({size / 1024 / 1024:.1f} MiB CSV), {args.existing:,} already there")
    print(
        f"  upload (import_upload, in-process): {upload['seconds']:.1f} s, peak RSS {upload['rss_peak'] / mib:.0f} MiB"
    )
    print(f"    (the process held {upload['rss_before'] / mib:.0f} MiB with Django loaded, before reading the file)")
    for name, figures in (("check (dry run)", check), ("import", imported)):
        print(
            f"  {name}, one runworker: {figures['seconds']:.1f} s ({args.rows / figures['seconds']:,.0f} rows/s),"
            f" peak RSS {figures['peak'] / mib:.0f} MiB (idle {figures['idle'] / mib:.0f} MiB)"
        )
    print(f"  contacts in the account afterwards: {count:,}")
    print(f"  mapping page, {args.columns} columns: {page_seconds * 1000:.0f} ms, {page_bytes / 1024:.0f} KiB")
    print(f"  rerun: .venv/bin/python bench/contact_import.py --rows {args.rows} --existing {args.existing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
