"""A worker whose database connections are cut (a failover, a restart, a network blip) keeps what it owes:
completions, failed attempts and claimed jobs are written once the database is reachable again, not left
`running` for a whole lease (660 s by default) and run a second time.

The connections are cut with pg_terminate_backend, a real lost connection, never by restarting the shared
PostgreSQL server; `bench/db_restart_recovery.py` restarts a private cluster and measures the recovery.
"""

import pytest
from django.db import connection

from jobs.application.queue import JobSpec, enqueue_many
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.support.handlers import read_records
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HANDLERS = {"JOB_HANDLER_MODULES": "tests.support.handlers", "JOB_POLL_INTERVAL": "0.5"}


def _own_backend() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _statuses(ids) -> dict:
    return dict(Job.objects.filter(pk__in=ids).values_list("pk", "status"))


@pytest.mark.parametrize("fail", [False, True], ids=["completed", "failed"])
def test_what_a_worker_owes_when_its_connection_is_cut_is_written_once_it_is_back(start_worker, tmp_path, fail):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker("--concurrency", "1", **HANDLERS, JOB_RETRY_DELAY_SECONDS="3600")
    worker.wait_for_output(" started: ")
    # One claim takes them all: the cut comes first, the others wait unstarted behind it in the same batch.
    cut, *others = enqueue_many(
        [JobSpec("test.cut_connections", {"path": path, "spare": [_own_backend()], "fail": fail}, priority=-1)]
        + [JobSpec("test.record", {"path": path, "tag": "after"}) for _ in range(8)]
    )
    done = JobStatus.RETRYING if fail else JobStatus.COMPLETED
    wait_until(lambda: _statuses([cut]) == {cut: done}, 10, "the cut job's outcome to be written")
    wait_until(
        lambda: set(_statuses(others).values()) == {JobStatus.COMPLETED}, 10, "the jobs claimed with it to complete"
    )
    cut_job = Job.objects.get(pk=cut)
    assert cut_job.attempt_number == 1  # written by the worker that ran it: no lease passed, no rescue
    if fail:
        assert cut_job.error_message == "ServerFailure: the connection was cut on purpose"
    runs = read_records(path)
    assert sorted(r["job"] for r in runs) == sorted(str(i) for i in [cut, *others]), "each job ran exactly once"
    output = worker.output()
    assert "kept" in output
    assert "the database is reachable again" in output
    assert worker.proc.poll() is None


def test_a_postgresql_restart_mid_drain_strands_no_job_and_runs_none_twice():
    """A real restart, of a private cluster (bench/db_restart_recovery.py; never the shared server). Before,
    the completions a worker could not acknowledge were thrown away: those jobs stayed `running` for their
    lease (660 s) and ran again. The bench script measures the recovery (bench/README.md: about 1 s)."""
    import json
    import subprocess
    import sys

    from tests.support.processes import ROOT

    script = ROOT / "bench" / "db_restart_recovery.py"
    command = [sys.executable, str(script), "--jobs", "600", "--at", "0.3", "--down", "1", "--timeout", "60"]
    finished = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert 0 < result["completed_before_fault"] < 600  # the restart came mid-drain
    assert result["all_completed"], result  # within the minute, not after the 660 s lease
    assert result["ran_twice"] == 0, result
    assert result["runs"] == 600
