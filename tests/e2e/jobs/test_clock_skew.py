"""A worker whose host clock runs two minutes fast (libfaketime under a real runworker) fires cron ticks on the
database's clock: none early, none skipped."""

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from jobs.domain.schedule import next_tick
from jobs.infrastructure.clock import database_now
from jobs.models import Job, Schedule
from tests.support.handlers import read_records
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")  # Debian's `faketime` (.ci/run installs it)
SKEW = 120.0


@pytest.fixture
def libfaketime() -> str:
    if not LIBFAKETIME.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{LIBFAKETIME} is missing: .ci/run installs the Debian package faketime")
        pytest.skip("needs Debian's faketime package (apt-get install faketime)")
    return str(LIBFAKETIME)


def test_a_worker_two_minutes_fast_fires_a_tick_on_time_and_computes_the_next_from_the_database(
    start_worker, tmp_path, libfaketime
):
    path = str(tmp_path / "ticks.jsonl")
    tick = database_now() + dt.timedelta(seconds=10)
    if tick.second >= 55:  # keep the firing well inside one minute, so the next tick is unambiguous
        tick += dt.timedelta(seconds=8)
    schedule = Schedule.objects.create(
        name="every-minute", cron="* * * * *", handler="test.record", payload={"path": path}, next_run_at=tick
    )
    worker = start_worker(
        JOB_HANDLER_MODULES="tests.support.handlers",
        JOB_POLL_INTERVAL="0.2",
        LD_PRELOAD=libfaketime,
        FAKETIME=f"+{SKEW:.0f}s",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    worker.wait_for_output("started", timeout=30)
    assert database_now() < tick, "the worker took too long to start for this test to mean anything"

    records = wait_until(lambda: read_records(path), 40, "the tick's job to run")
    assert records[0]["started"] - time.time() > SKEW - 10, "the worker's clock was not skewed"
    job = Job.objects.get(handler="test.record")
    assert job.created_at >= tick, f"fired {(tick - job.created_at).total_seconds():.1f} s early"
    assert job.payload["scheduled_for"] == tick.isoformat()
    schedule.refresh_from_db()
    # The tick right after this one, not one two minutes on (which would skip two ticks).
    assert schedule.next_run_at == next_tick("* * * * *", tick)
    assert schedule.missed_ticks == 0
    assert Job.objects.filter(handler="test.record").count() == 1
