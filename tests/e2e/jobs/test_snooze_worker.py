"""A real `runworker` process runs a handler that snoozes: the job comes back after its snooze (the database's
clock), each run is the same attempt, the row counts the snoozes, and /metrics counts them once flushed."""

import itertools

import pytest

from jobs.application import metrics
from jobs.application.queue import enqueue
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.support.handlers import read_records
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HANDLERS = {"JOB_HANDLER_MODULES": "tests.support.handlers", "JOB_POLL_INTERVAL": "0.2"}


def test_a_worker_process_brings_a_snoozed_job_back_after_its_snooze_and_counts_it(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS)
    job = enqueue("test.snooze", {"path": path, "times": 2, "seconds": 1.5}, max_attempts=1)
    wait_until(lambda: Job.objects.get(pk=job.pk).status == JobStatus.COMPLETED, 30, "the job to complete")

    stored = Job.objects.get(pk=job.pk)
    assert (stored.attempt_number, stored.snoozes) == (1, 2)
    runs = [r for r in read_records(path) if r["job"] == str(job.pk)]
    assert [(r["run"], r["attempt"]) for r in runs] == [(1, 1), (2, 1), (3, 1)]
    gaps = [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(runs)]
    assert all(gap >= 1.4 for gap in gaps), gaps  # due again its snooze after, not at once
    worker.wait_for_output(f"job {job.pk} test.snooze snoozed for 1.5 s (attempt 1 not counted): not yet")

    worker.stop(timeout=15)  # a stopping worker adds what it counted to the database
    text = metrics.render().decode()
    assert 'relay_jobs_snoozes_total{handler="test.snooze"} 2.0' in text
    assert "Traceback" not in worker.output()
