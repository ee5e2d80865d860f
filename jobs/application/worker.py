"""The worker: claim due jobs in batches, run them, acknowledge them, stop cleanly.

One process = one worker id. Its main thread supervises: signals, lease
rescue, cron schedules, execution deadlines. `concurrency` executor threads
each loop over:

    claim a batch (one statement)  ->  run each handler  ->  acknowledge the
    completed ones (one statement); a failure is written at once, as a retry
    with backoff, a permanent failure, or dead.

An idle executor sleeps until a committed enqueue wakes it (LISTEN/NOTIFY on
PostgreSQL) or the poll interval passes. SIGTERM/SIGINT: stop claiming, let
running jobs finish within the grace period, put the rest back to pending
without counting the attempt.
"""

from __future__ import annotations

import ctypes
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import DatabaseError, connections

from jobs.application.config import QueueConfig
from jobs.application.context import JobContext
from jobs.application.registry import UnknownHandler, get_handler
from jobs.domain.errors import JobTimeout, LeaseLost, PermanentError, classify, format_error
from jobs.domain.states import JobStatus
from jobs.infrastructure.listener import NotificationListener
from jobs.infrastructure.store import ClaimedJob, Finished, JobStore, get_store

log = logging.getLogger("relay.worker")

BATCH_TARGET_SECONDS = 0.05  # claim about as many jobs as one executor finishes in this time
RESTART_EXIT_CODE = 75


def new_worker_id() -> str:
    """Unique per process start, so a restarted process never inherits its predecessor's leases."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class WorkSignal:
    """Wakes idle executors. Tokens remember wake-ups that came while every executor was busy."""

    def __init__(self, limit: int) -> None:
        self._cond = threading.Condition()
        self._tokens = 0
        self._limit = max(1, limit)

    def wake(self, count: int = 1) -> None:
        with self._cond:
            self._tokens = min(self._limit, self._tokens + max(1, count))
            self._cond.notify(self._tokens)

    def wake_all(self) -> None:
        self.wake(self._limit)

    def wait(self, timeout: float) -> None:
        with self._cond:
            if self._tokens == 0:
                self._cond.wait(timeout)
            if self._tokens:
                self._tokens -= 1


@dataclass
class _Running:
    job: ClaimedJob
    thread_id: int
    deadline: float  # monotonic: the handler is interrupted here
    hard_deadline: float  # monotonic: past this the process replaces itself
    interrupted: bool = False


class Worker:
    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        burst: bool = False,
        config: QueueConfig | None = None,
        using: str = "default",
        install_signal_handlers: bool = True,
    ) -> None:
        self.config = config or QueueConfig.from_settings()
        self.queues = list(queues) if queues else None
        self.concurrency = max(1, concurrency or self.config.concurrency)
        self.burst = burst
        self.using = using
        self.worker_id = new_worker_id()
        self.stopping = threading.Event()
        self.signal = WorkSignal(self.concurrency)
        self._running: dict[int, _Running] = {}  # executor index -> what it runs now
        self._lock = threading.Lock()
        self._busy = 0  # executors holding a batch (burst mode exits when none are)
        self._restart = False
        self._listener: NotificationListener | None = None
        self._executors: list[threading.Thread] = []
        self._install_signals = install_signal_handlers

    # --- the main thread ---------------------------------------------------------
    def run(self) -> int:
        self._install_signal_handlers()
        store = get_store(self.using)
        if store.vendor == "postgresql" and not self.burst:
            self._listener = NotificationListener(
                connections[self.using], self.queues, on_wake=self.signal.wake, on_connect=self.signal.wake_all
            )
            self._listener.start()
        log.info(
            "worker %s started: queues=%s concurrency=%d burst=%s",
            self.worker_id,
            ",".join(self.queues) if self.queues else "all",
            self.concurrency,
            self.burst,
        )
        for index in range(self.concurrency):
            thread = threading.Thread(target=self._executor, args=(index,), name=f"executor-{index}", daemon=True)
            thread.start()
            self._executors.append(thread)

        from jobs.application.schedules import fire_due_schedules

        next_maintenance = 0.0
        tick = min(0.1, self.config.poll_interval)
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_maintenance:
                self._maintain(store, fire_due_schedules)
                next_maintenance = now + max(0.5, self.config.poll_interval)
            self._enforce_deadlines()
            if self.burst and not any(t.is_alive() for t in self._executors):
                break
            self.stopping.wait(tick)
        return self._shutdown(store)

    def stop(self, *_: object) -> None:
        if not self.stopping.is_set():
            log.info("worker %s stopping: no new claims; grace %.0f s", self.worker_id, self.config.shutdown_grace)
        self.stopping.set()
        self.signal.wake_all()

    def _install_signal_handlers(self) -> None:
        if self._install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)

    def _maintain(self, store: JobStore, fire_due_schedules) -> None:
        """Rescue jobs whose worker died, and fire due cron schedules. Any worker may do it; it is idempotent."""
        try:
            for job_id, status, _queue in store.rescue_expired():
                log.warning("job %s lease expired; rescued to %s (the attempt counts)", job_id, status)
            fire_due_schedules(using=self.using)
        except DatabaseError as exc:
            log.warning("maintenance failed, will retry: %s", format_error(exc))
            connections[self.using].close()

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        with self._lock:
            overdue = [r for r in self._running.values() if now >= r.deadline]
            for running in overdue:
                if not running.interrupted:
                    running.interrupted = True
                    _raise_in_thread(running.thread_id, JobTimeout)
        for running in overdue:
            if now >= running.hard_deadline and not self._restart:
                # The handler ignored the interruption (blocked in C code): record the failed attempt
                # now, while this worker still holds the lease, then replace the process.
                log.error(
                    "job %s (%s) did not stop after its timeout; this worker restarts",
                    running.job.id,
                    running.job.handler,
                )
                self._record_failure(
                    get_store(self.using), running.job, JobTimeout(self._timeout_message()), time.time()
                )
                self._restart = True
                self.stop()

    def _shutdown(self, store: JobStore) -> int:
        self.stopping.set()
        self.signal.wake_all()
        grace = self.config.shutdown_grace
        if self._restart:
            grace = min(grace, self.config.lease_margin / 3)
        deadline = time.monotonic() + grace
        for thread in self._executors:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._listener:
            self._listener.stop()
        try:
            released = store.release(self.worker_id)
        except DatabaseError as exc:  # the leases will expire and the jobs be rescued
            log.error("could not release running jobs: %s", format_error(exc))
            released = []
        for job_id in released:
            log.info("job %s released to pending (shutdown; the attempt does not count)", job_id)
        log.info("worker %s stopped", self.worker_id)
        if self._restart:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, *sys.argv])  # noqa: S606 - replace this process
        return 0

    def _timeout_message(self) -> str:
        return f"handler exceeded JOB_EXECUTION_TIMEOUT ({self.config.execution_timeout:g} s)"

    # --- executor threads ---------------------------------------------------------
    def _executor(self, index: int) -> None:
        store = get_store(self.using)
        duration = 0.0  # moving average of a job's run time, sizes the next claim
        failures = 0
        try:
            while not self.stopping.is_set():
                limit = _batch_limit(duration, self.config.batch_size)
                with self._lock:
                    self._busy += 1
                try:
                    batch = store.claim(self.worker_id, self.queues, limit, self.config.lease_seconds)
                    failures = 0
                except DatabaseError as exc:
                    with self._lock:
                        self._busy -= 1
                    failures += 1
                    log.warning("claim failed (%s); reconnecting", format_error(exc))
                    connections[self.using].close()
                    self.stopping.wait(min(10.0, 0.2 * 2**failures))
                    continue
                if not batch:
                    with self._lock:
                        self._busy -= 1
                        others_busy = self._busy > 0
                    if self.burst and not others_busy:
                        return
                    self.signal.wait(0.05 if self.burst else self.config.poll_interval)
                    continue
                try:
                    duration = self._run_batch(store, index, batch, duration)
                finally:
                    with self._lock:
                        self._busy -= 1
        finally:
            connections[self.using].close()

    def _run_batch(self, store: JobStore, index: int, batch: list[ClaimedJob], duration: float) -> float:
        done: list[Finished] = []
        claimed_at = time.monotonic()
        for position, job in enumerate(batch):
            if self.stopping.is_set() or (position and time.monotonic() - claimed_at > self._hold_limit()):
                # Give back what this executor did not start: to other workers, or to the next start.
                store.release(self.worker_id, [j.id for j in batch[position:]])
                break
            started = time.time()
            finished = self._run_job(store, index, job, started, claimed_at)
            if finished is not None:
                done.append(finished)
                duration = 0.8 * duration + 0.2 * (finished.finished - finished.started)
        self._acknowledge(store, done)
        return duration

    def _hold_limit(self) -> float:
        """How long an executor may keep claimed jobs it has not started."""
        return min(1.0, self.config.lease_margin / 4)

    def _run_job(
        self, store: JobStore, index: int, job: ClaimedJob, started: float, claimed_at: float
    ) -> Finished | None:
        context = JobContext(
            id=job.id,
            handler=job.handler,
            queue=job.queue,
            attempt_number=job.attempt_number,
            max_attempts=job.max_attempts,
            account_id=job.account_id,
            worker_id=self.worker_id,
            started=started,
            _store=store,
        )
        timeout = self.config.execution_timeout
        now = time.monotonic()
        deadline = min(now + timeout, claimed_at + timeout + self._hold_limit())
        running = _Running(job, threading.get_ident(), deadline, deadline + self.config.lease_margin / 3)
        error: BaseException | None = None
        try:
            handler = get_handler(job.handler)
            with self._lock:
                self._running[index] = running
            try:
                handler(job.payload, context)
            finally:
                with self._lock:
                    self._running.pop(index, None)
                    if running.interrupted:
                        _raise_in_thread(running.thread_id, None)  # cancel a timeout that came too late
        except JobTimeout:
            error = JobTimeout(self._timeout_message())
        except UnknownHandler as exc:
            error = PermanentError(str(exc))
        except LeaseLost as exc:
            log.warning("job %s %s: %s; its outcome is discarded", job.id, job.handler, exc)
            return None
        except Exception as exc:
            error = exc
        if error is not None:
            self._record_failure(store, job, error, started)
            return None
        if context.completed_in_transaction:
            log.info("job %s %s completed in %.1f ms", job.id, job.handler, (time.time() - started) * 1000)
            return None
        return Finished(job.id, job.attempt_number, started, time.time())

    def _acknowledge(self, store: JobStore, done: list[Finished]) -> None:
        if not done:
            return
        try:
            acked = store.complete(self.worker_id, done)
        except DatabaseError as exc:
            # Unacknowledged jobs stay running until their lease passes, then are rescued and re-run:
            # at-least-once, never lost.
            log.error("could not acknowledge %d completed jobs: %s", len(done), format_error(exc))
            connections[self.using].close()
            return
        for finished in done:
            if finished.id in acked:
                log.info(
                    "job %s completed in %.1f ms (attempt %d)",
                    finished.id,
                    (finished.finished - finished.started) * 1000,
                    finished.attempt_number,
                )
            else:
                log.warning("job %s completion refused: this worker no longer holds its lease", finished.id)

    def _record_failure(self, store: JobStore, job: ClaimedJob, exc: BaseException, started: float) -> None:
        error = classify(exc)
        decision = self.config.retry.decide(
            attempt_number=job.attempt_number, error=error, max_attempts=job.max_attempts
        )
        if decision.status is not JobStatus.FAILED or not isinstance(exc, PermanentError):
            log.debug("job %s raised", job.id, exc_info=exc)  # the stack trace goes to the log only
        try:
            written = store.fail(
                self.worker_id,
                job.id,
                job.attempt_number,
                status=decision.status.value,
                error=error.message,
                delay=decision.delay,
                started=started,
            )
        except DatabaseError as exc2:
            log.error("could not record failure of job %s: %s", job.id, format_error(exc2))
            connections[self.using].close()
            return
        if not written:
            log.warning("job %s failure not recorded: this worker no longer holds its lease", job.id)
        elif decision.will_retry:
            log.warning(
                "job %s %s attempt %d/%d failed (%s), retrying in %.1f s: %s",
                job.id,
                job.handler,
                job.attempt_number,
                job.max_attempts,
                error.category,
                decision.delay,
                error.message,
            )
        else:
            log.error(
                "job %s %s %s after attempt %d/%d (%s): %s",
                job.id,
                job.handler,
                decision.status,
                job.attempt_number,
                job.max_attempts,
                error.category,
                error.message,
            )


def _batch_limit(average_duration: float, batch_size: int) -> int:
    """Claim what this executor will start soon: many fast jobs, one slow job."""
    if average_duration <= 0:
        return min(batch_size, 10)
    return max(1, min(batch_size, int(BATCH_TARGET_SECONDS / average_duration)))


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Raise `exc_type` inside another thread at its next Python instruction (None cancels)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )
