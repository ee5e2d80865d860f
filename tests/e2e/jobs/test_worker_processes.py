"""Real `runworker` processes: crashes, shutdowns, timeouts, many workers, fairness."""

import signal
import time

import pytest

from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.domain.states import JobStatus
from jobs.models import Job
from tests.factories import AccountFactory
from tests.support.handlers import read_records
from tests.support.processes import wait_until
from tests.support.queue_db import connection  # the queue's database: its listener is the one cut

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HANDLERS = {"JOB_HANDLER_MODULES": "tests.support.handlers", "JOB_POLL_INTERVAL": "0.2"}


def _status(job) -> str:
    return Job.objects.get(pk=job.pk).status


def _wait_status(job, status, timeout=30) -> Job:
    wait_until(lambda: _status(job) == status, timeout, f"job {job.pk} to be {status}")
    return Job.objects.get(pk=job.pk)


def test_a_worker_runs_jobs_and_logs_one_line_per_outcome(start_worker, tmp_path):
    worker = start_worker("--concurrency", "2", **HANDLERS, JOB_RETRY_DELAY_SECONDS="0.1", JOB_RETRY_JITTER="0")
    ok = enqueue("log_message", {"message": "hello from the test"})
    permanent = enqueue("test.fail", {"kind": "validation", "message": "bad input"})
    flaky = enqueue("test.fail", {"kind": "server", "succeed_on_attempt": 2})
    exhausted = enqueue("test.fail", {"kind": "server"}, max_attempts=2)

    assert _wait_status(ok, JobStatus.COMPLETED).attempt_number == 1
    failed = _wait_status(permanent, JobStatus.FAILED)
    assert (failed.attempt_number, failed.error_message) == (1, "ValidationFailure: bad input")
    assert _wait_status(flaky, JobStatus.COMPLETED).attempt_number == 2
    dead = _wait_status(exhausted, JobStatus.DEAD)
    assert (dead.attempt_number, dead.error_message) == (2, "ServerFailure: it failed")

    worker.wait_for_output(f"job {exhausted.pk} test.fail dead after attempt 2/2")
    log = worker.output()
    assert "log_message: hello from the test" in log
    assert log.count(f"job {ok.pk} completed") == 1
    assert log.count(f"job {permanent.pk} test.fail failed after attempt 1/4") == 1
    assert log.count(f"job {flaky.pk} test.fail attempt 1/4 failed (server_error), retrying in 0.1 s") == 1
    assert "Traceback" not in log


def test_kill_9_during_a_job_and_it_is_rescued_after_its_lease_and_completes(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    env = {**HANDLERS, "JOB_EXECUTION_TIMEOUT": "3"}  # lease: 3 s + 2 s margin
    first = start_worker(**env)
    job = enqueue("test.block", {"path": path, "seconds": 1.0})
    wait_until(lambda: read_records(path), 20, "the job to start")
    first.kill()
    lease_end = Job.objects.get(pk=job.pk).lease_expires_at.timestamp()
    assert _status(job) == JobStatus.RUNNING  # its worker is gone, its lease holds

    start_worker(**env)
    done = _wait_status(job, JobStatus.COMPLETED, timeout=30)
    assert done.attempt_number == 2  # the killed attempt counts
    starts = [r for r in read_records(path) if r["event"] == "start"]
    assert [r["attempt"] for r in starts] == [1, 2]
    assert starts[1]["at"] >= lease_end, "the second attempt started before the first one's lease passed"


def test_sigterm_during_a_job_puts_it_back_to_pending_uncounted(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS, JOB_SHUTDOWN_GRACE="1")
    job = enqueue("test.block", {"path": path, "seconds": 30})
    wait_until(lambda: read_records(path), 20, "the job to start")
    assert Job.objects.get(pk=job.pk).attempt_number == 1

    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(15) == 0
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempt_number) == (JobStatus.PENDING, 0)
    assert f"job {job.pk} released to pending" in worker.output()


def test_sigterm_lets_a_running_job_finish_within_the_grace_period(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS, JOB_SHUTDOWN_GRACE="10")
    job = enqueue("test.block", {"path": path, "seconds": 1.5})
    wait_until(lambda: read_records(path), 20, "the job to start")
    worker.signal(signal.SIGINT)
    assert worker.proc.wait(15) == 0
    assert _status(job) == JobStatus.COMPLETED
    assert [r["event"] for r in read_records(path)] == ["start", "end"]


def test_three_workers_run_each_of_2000_jobs_exactly_once(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    workers = [start_worker("--concurrency", "2", **HANDLERS) for _ in range(3)]
    for worker in workers:
        worker.wait_for_output(" started: ")
    # 2 ms of work per job: long enough that every worker gets a share, whatever the start-up order
    ids = enqueue_many([JobSpec("test.record", {"path": path, "sleep": 0.002}) for _ in range(2000)])
    wait_until(lambda: Job.objects.filter(status=JobStatus.COMPLETED).count() == 2000, 120, "2,000 jobs to complete")
    runs = read_records(path)
    assert len(runs) == 2000
    assert sorted(r["job"] for r in runs) == sorted(str(i) for i in ids)
    assert {r["attempt"] for r in runs} == {1}
    assert len({r["pid"] for r in runs}) == 3, "every worker took a share"
    assert all(w.proc.poll() is None for w in workers)


def test_a_job_that_always_kills_its_worker_ends_dead_after_max_attempts(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    env = {**HANDLERS, "JOB_EXECUTION_TIMEOUT": "1"}  # lease: 1 s + 2 s margin
    job = enqueue("test.kill_worker", {"path": path}, max_attempts=2)
    worker = start_worker(**env)
    deadline = time.monotonic() + 60
    while _status(job) != JobStatus.DEAD:
        assert time.monotonic() < deadline, "the poison job never ended dead"
        if worker.proc.poll() is not None:  # a supervisor restarts dead workers; here, the test does
            worker = start_worker(**env)
        time.sleep(0.1)
    stored = Job.objects.get(pk=job.pk)
    assert stored.attempt_number == 2
    assert stored.error_message.startswith("LeaseExpired: worker ")
    assert [r["attempt"] for r in read_records(path)] == [1, 2]
    time.sleep(1.5)
    assert worker.proc.poll() is None, "the last worker lives: the dead job is not run again"


def test_a_handler_that_outruns_the_timeout_is_stopped_and_the_attempt_fails(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS, JOB_EXECUTION_TIMEOUT="1")
    job = enqueue("test.spin", {"path": path, "seconds": 30}, max_attempts=1)
    dead = _wait_status(job, JobStatus.DEAD, timeout=20)
    assert dead.error_message == "JobTimeout: handler exceeded JOB_EXECUTION_TIMEOUT (1 s)"
    assert [r["event"] for r in read_records(path)] == ["start"]  # it never reached its end
    after = enqueue("log_message", {"message": "still alive"})
    _wait_status(after, JobStatus.COMPLETED)
    assert worker.proc.poll() is None


def test_a_handler_blocked_past_the_timeout_makes_the_worker_replace_itself(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS, JOB_EXECUTION_TIMEOUT="1")
    worker.wait_for_output("started")
    job = enqueue("test.block", {"path": path, "seconds": 120}, max_attempts=1)
    dead = _wait_status(job, JobStatus.DEAD, timeout=20)
    assert dead.error_message == "JobTimeout: handler exceeded JOB_EXECUTION_TIMEOUT (1 s)"
    worker.wait_for_output("did not stop after its timeout; this worker restarts")
    wait_until(lambda: worker.output().count(" started: ") == 2, 20, "the worker to start again")
    assert worker.proc.poll() is None  # the same process (same pid), replaced in place
    after = enqueue("log_message", {"message": "after the restart"})
    _wait_status(after, JobStatus.COMPLETED)


def test_one_accounts_flood_respects_its_limit_and_does_not_starve_another(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    flood = AccountFactory(max_concurrent_jobs=2)
    other = AccountFactory()
    for _ in range(2):
        start_worker("--concurrency", "4", **HANDLERS, LOG_LEVEL="WARNING")
    enqueue_many([JobSpec("test.record", {"path": path, "sleep": 0.02, "tag": "flood"}, account=flood)] * 5000)
    wait_until(lambda: len(read_records(path)) >= 20, 30, "the flood to be under way")

    running_seen = []
    for _ in range(40):
        running_seen.append(Job.objects.filter(account=flood, status=JobStatus.RUNNING).count())
        time.sleep(0.02)
    enqueued_at = time.time()
    enqueue("test.record", {"path": path, "tag": "other"}, account=other)
    picked = wait_until(
        lambda: [r for r in read_records(path) if r["tag"] == "other"], 10, "the other account's job to run"
    )
    pickup = picked[0]["started"] - enqueued_at
    assert pickup < 1.0, f"the other account waited {pickup:.2f} s"
    assert max(running_seen) <= 2
    assert Job.objects.filter(account=flood, status=JobStatus.PENDING).count() > 1000  # still flooded

    # Across all handler runs so far, never more than two of the flood's jobs overlapped.
    events = sorted(
        [(r["started"], 1) for r in read_records(path) if r["tag"] == "flood"]
        + [(r["finished"], -1) for r in read_records(path) if r["tag"] == "flood"]
    )
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    assert peak <= 2


def test_burst_mode_drains_what_is_due_and_exits(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    enqueue_many([JobSpec("test.record", {"path": path}) for _ in range(50)])
    worker = start_worker("--burst", **HANDLERS)
    assert worker.proc.wait(60) == 0
    assert len(read_records(path)) == 50
    assert Job.objects.filter(status=JobStatus.COMPLETED).count() == 50


@pytest.mark.postgres
def test_a_committed_enqueue_wakes_an_idle_worker_at_once_even_after_connection_loss(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**{**HANDLERS, "JOB_POLL_INTERVAL": "60"})  # polling cannot explain a fast pickup
    worker.wait_for_output("listening for job notifications")
    time.sleep(0.5)

    def pickup_seconds(tag: str) -> float:
        sent = time.time()
        enqueue("test.record", {"path": path, "tag": tag})
        runs = wait_until(lambda: [r for r in read_records(path) if r["tag"] == tag], 10, f"job {tag} to run")
        return runs[0]["started"] - sent

    assert pickup_seconds("first") < 0.5

    with connection.cursor() as cursor:  # cut every connection the worker has
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
    worker.wait_for_output("notification listener lost its connection")
    wait_until(lambda: worker.output().count("listening for job notifications") == 2, 20, "the listener to return")
    time.sleep(0.3)
    assert pickup_seconds("after reconnect") < 1.0
    assert worker.proc.poll() is None


def test_a_job_finished_before_shutdown_is_acknowledged_not_run_again(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker("--concurrency", "1", **HANDLERS, JOB_SHUTDOWN_GRACE="1")
    worker.wait_for_output(" started: ")
    fast, slow = enqueue_many(
        [
            JobSpec("test.record", {"path": path, "tag": "fast"}, priority=-1),
            JobSpec("test.block", {"path": path, "seconds": 30}),
        ]
    )
    wait_until(lambda: any(r.get("event") == "start" for r in read_records(path)), 20, "the slow job to start")
    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(15) == 0
    assert Job.objects.get(pk=fast).status == JobStatus.COMPLETED
    slow_job = Job.objects.get(pk=slow)
    assert (slow_job.status, slow_job.attempt_number) == (JobStatus.PENDING, 0)
    assert [r["tag"] for r in read_records(path) if r.get("tag")] == ["fast"]


def test_a_handler_that_leaves_a_transaction_open_does_not_stall_the_queue(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker("--concurrency", "1", **HANDLERS)
    leaky = enqueue("test.leak_transaction", {"path": path})
    _wait_status(leaky, JobStatus.COMPLETED)
    later = enqueue_many([JobSpec("test.record", {"path": path, "tag": "after"}) for _ in range(5)])
    wait_until(
        lambda: Job.objects.filter(pk__in=later, status=JobStatus.COMPLETED).count() == 5, 20, "later jobs to complete"
    )
    worker.wait_for_output(f"job {leaky.pk} test.leak_transaction left a transaction open; it was rolled back")


def test_a_completion_rolled_back_with_its_transaction_is_acknowledged_by_the_worker(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    start_worker(**HANDLERS)
    job = enqueue("test.completes_then_rolls_back", {"path": path})
    done = _wait_status(job, JobStatus.COMPLETED, timeout=15)
    assert done.attempt_number == 1
    assert len(read_records(path)) == 1


@pytest.mark.postgres
def test_a_handler_whose_connection_dies_fails_at_once_and_is_retried(start_worker, tmp_path):
    worker = start_worker(**HANDLERS, JOB_RETRY_DELAY_SECONDS="60")
    job = enqueue("test.break_connection", {})
    failed = _wait_status(job, JobStatus.RETRYING, timeout=15)
    assert failed.attempt_number == 1
    assert failed.error_message.startswith(("OperationalError", "InterfaceError"))
    after = enqueue("log_message", {"message": "the worker goes on"})
    _wait_status(after, JobStatus.COMPLETED)
    assert worker.proc.poll() is None


@pytest.mark.postgres
def test_a_handler_stuck_in_sql_is_cancelled_at_its_timeout(start_worker, tmp_path):
    path = str(tmp_path / "runs.jsonl")
    worker = start_worker(**HANDLERS, JOB_EXECUTION_TIMEOUT="1")
    job = enqueue("test.sql_sleep", {"path": path, "seconds": 60}, max_attempts=1)
    dead = _wait_status(job, JobStatus.DEAD, timeout=15)
    assert dead.error_message == "JobTimeout: handler exceeded JOB_EXECUTION_TIMEOUT (1 s)"
    assert "this worker restarts" not in worker.output()  # the query was cancelled; no restart was needed
    assert [r["event"] for r in read_records(path)] == ["start"]
