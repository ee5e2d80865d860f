"""A handler that ignores its timeout, a process paused with SIGSTOP: real `runworker` processes.

- A runaway handler (blocked in C past its timeout) makes the worker replace itself; its timeout is recorded
  first, due again only once the process is surely gone, so the other handlers get the whole
  JOB_SHUTDOWN_GRACE to finish instead of being cut off and run again.
- Its timeout is recorded once: the handler returning later writes nothing ("failure not recorded" was
  logged for it, as if another worker had taken it).
- A process stopped with SIGSTOP and continued is paused, not slow: the pause does not count in its
  handlers' time, so nothing is mistaken for a timeout and the worker does not restart.
"""

import signal
import time

import pytest

from jobs.application.queue import enqueue
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.support.handlers import read_records
from tests.support.processes import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HANDLERS = {"JOB_HANDLER_MODULES": "tests.support.handlers", "JOB_POLL_INTERVAL": "0.2"}


def _records(path: str, job) -> list[str]:
    return [r["event"] for r in read_records(path) if r["job"] == str(job.pk)]


def _started_at(path: str, job) -> float:
    runs = wait_until(lambda: [r for r in read_records(path) if r["job"] == str(job.pk)], 20, f"job {job.pk} to start")
    return runs[0]["at"]


def test_a_restart_for_a_runaway_handler_lets_the_other_jobs_finish(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    # Timeout 6 s: the runaway's hard deadline is 6.7 s after it starts; the old grace (a third of the 2 s
    # lease margin) ended 0.7 s later, cutting off a job that needed 4 s and started 4.5 s in.
    worker = start_worker("--concurrency", "2", **HANDLERS, JOB_EXECUTION_TIMEOUT="6", JOB_SHUTDOWN_GRACE="15")
    worker.wait_for_output(" started: ")
    runaway = enqueue("test.block", {"path": path, "seconds": 8}, max_attempts=3)
    started = _started_at(path, runaway)
    time.sleep(max(0.0, started + 4.5 - time.time()))
    other = enqueue("test.block", {"path": path, "seconds": 4})
    worker.wait_for_output("did not stop after its timeout; this worker restarts", timeout=20)
    wait_until(lambda: Job.objects.get(pk=other.pk).status == JobStatus.COMPLETED, 20, "the other job to complete")
    wait_until(lambda: worker.output().count(" started: ") == 2, 20, "the worker to come back")

    assert _records(path, other) == ["start", "end"], "the other job ran once, to its end, before the restart"
    assert Job.objects.get(pk=other.pk).attempt_number == 1
    stopped = Job.objects.get(pk=runaway.pk)
    assert (stopped.status, stopped.attempt_number) == (JobStatus.RETRYING, 1)
    assert stopped.error_message == "JobTimeout: handler exceeded JOB_EXECUTION_TIMEOUT (6 s)"
    assert (stopped.run_at.timestamp() - started) > 15, "not due before the old process is surely gone"
    output = worker.output()
    assert "failure not recorded" not in output  # its timeout was recorded once, by the main thread
    assert f"job {runaway.pk} test.block returned after its timeout was recorded" in output
    assert output.count(f"job {runaway.pk} test.block attempt 1/3 failed (timeout)") == 1
    assert worker.proc.poll() is None


def test_a_paused_process_is_not_mistaken_for_a_runaway_handler(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    # Timeout 6 s: deadline 6 s, runaway at 6.7 s, lease 8 s. Stopped for 6.8 s from 0.5 s in, the worker
    # resumes past both deadlines but within the lease: the handler, 2 s of work, is only paused.
    worker = start_worker("--concurrency", "1", **HANDLERS, JOB_EXECUTION_TIMEOUT="6")
    worker.wait_for_output(" started: ")
    job = enqueue("test.block", {"path": path, "seconds": 2}, max_attempts=1)
    started = _started_at(path, job)
    time.sleep(max(0.0, started + 0.5 - time.time()))
    worker.signal(signal.SIGSTOP)
    time.sleep(6.8)
    worker.signal(signal.SIGCONT)
    done = wait_until(
        lambda: Job.objects.filter(pk=job.pk, status__in=[JobStatus.COMPLETED, JobStatus.DEAD]).first(),
        20,
        "the job to finish",
    )
    assert (done.status, done.attempt_number, done.error_message) == (JobStatus.COMPLETED, 1, "")
    assert _records(path, job) == ["start", "end"]
    output = worker.output()
    assert "was paused for" in output
    assert "did not stop after its timeout" not in output
    assert output.count(" started: ") == 1  # it did not restart
