"""The worker: claim due jobs in batches, run them, acknowledge them, stop cleanly.

One process = one worker id. `concurrency` executor threads each loop over:

    claim a batch (one statement)  ->  run each handler  ->  acknowledge the
    completed ones (one statement); a failure is written at once, as a retry
    with backoff, a permanent failure, or dead.

A handler that registered a batch handler gets the batch's jobs of its name
in one call (when there are two or more), under one deadline; what it leaves,
or everything it did not complete if it raises, runs one by one as above.

Each executor runs the queue's statements on a private connection and its
handlers on the thread's ordinary one, so nothing a handler does to its
connection reaches the queue. An idle executor sleeps until a committed
enqueue wakes it (LISTEN/NOTIFY on PostgreSQL) or the poll interval passes.
A maintenance thread rescues jobs of dead workers and fires cron schedules.
The main thread touches no database in normal operation: it handles signals
and execution deadlines. SIGTERM/SIGINT: stop claiming, let running jobs
finish within the grace period, put the rest back to pending uncounted.
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
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db import Error as DatabaseError

from jobs.application import metrics, notifications
from jobs.application.config import QUEUE_LOCK_TIMEOUT, QUEUE_STATEMENT_TIMEOUT, QueueConfig, reconnect_after
from jobs.application.context import JobContext, context_for
from jobs.application.dead_letters import tell_hook
from jobs.application.maintenance.cron import CronFiring
from jobs.application.maintenance.limits import LimitsRepair
from jobs.application.maintenance.metrics import MetricsFlush
from jobs.application.maintenance.outbox import OutboxMover, drain_outboxes, outboxes_to_move
from jobs.application.maintenance.rescue import LeaseRescue
from jobs.application.maintenance.service import MaintenanceService, stop_all
from jobs.application.maintenance.vacuum import QueueVacuuming
from jobs.application.payloads import Payload
from jobs.application.registry import DeadLetter, UnknownHandler, get_batch_handler, get_handler
from jobs.domain.retry import RetryDecision
from jobs.infrastructure.connections import cancel_statement, close_thread_connections, reset_handler_connections
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.listener import NotificationListener
from jobs.infrastructure.outbox import OUTBOX_CHANNEL
from jobs.infrastructure.store import ClaimedJob, Finished, JobStore, private_connection, store_for
from kernel.failures import ClassifiedError, JobTimeout, LeaseLost, PermanentError, classify, format_error

log = logging.getLogger("relay.worker")

BATCH_TARGET_SECONDS = 0.05  # claim about as many jobs as one executor finishes in this time
# The same, while the claims go to a batch handler: it starts them all at once, so none waits unstarted, and
# the more it gets the fewer statements each costs (2,000 three-step runs: 0.05 s gave batches of 3-9 jobs
# and ~140 runs/s; 0.5 s ~280 runs/s, see bench/README.md). A job then waits at most this long for its batch.
GROUP_TARGET_SECONDS = 0.5
ACK_DELAY_SECONDS = 0.05  # a completed job waits at most this long (plus one job) for its acknowledgement
# A main-thread tick this late while the process used almost no CPU was a pause (SIGSTOP, a frozen host), not
# a slow handler: no handler's time counts it. A handler hogging the GIL in C code delays the tick too, but
# burns CPU meanwhile, so it is still stopped at its deadline.
PAUSE_MIN_SECONDS = 1.0
# A handler that ignored its interruption: its job is due again no sooner than this process is surely gone
# (the shutdown grace, plus this), so no other worker can start it while the handler still runs here.
RUNAWAY_SLACK_SECONDS = 5.0


def new_worker_id() -> str:
    """Unique per process start, so a restarted process never inherits its predecessor's leases."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class _Interrupt(BaseException):
    """Raised inside a handler's thread at its deadline. A BaseException, so `except Exception` in a
    handler cannot swallow it."""


class _QueueUnreachable(Exception):
    """What an executor kept while the database was unreachable could not be written yet: try again later."""


class _DeadlinePassed(Exception):
    """A handler (or batch handler) the main thread interrupted at its deadline: recorded as JobTimeout."""


_T = TypeVar("_T")


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
    """What one executor's handler is doing, for the main thread's deadline checks."""

    job: ClaimedJob
    thread_id: int
    handler_connection: object
    claimed_at: float  # monotonic
    deadline: float  # monotonic, moved on by a pause: the handler is interrupted here
    hard_deadline: float  # the same: past this the handler is a runaway (its timeout recorded by the main thread)
    interrupted: bool = False
    returned: bool = False
    runaway: bool = False  # the main thread recorded its timeout: its executor records nothing more for it


@dataclass
class _Failure:
    """A failed attempt, decided (retry, failed, dead) and waiting to be written."""

    job: ClaimedJob
    error: ClassifiedError
    decision: RetryDecision
    delay: float | None
    started: float


@dataclass
class _Executor:
    index: int
    thread: threading.Thread | None = None
    running: _Running | None = None
    # What this executor owes the database. Written as soon as it can be; when the queue connection is lost
    # it is kept (never thrown away) and written once the database is back: completions, failed attempts,
    # and jobs it had claimed but not started (given back). A lease another worker took in between refuses
    # the write (the compare-and-set on every finish), so nothing is recorded twice.
    acks: list[Finished] = field(default_factory=list)  # completed, not yet acknowledged
    failures: list[_Failure] = field(default_factory=list)  # failed, not yet recorded
    unstarted: list = field(default_factory=list)  # ids claimed, never started, not yet given back
    connection_lost: bool = False  # a queue statement failed: start nothing more until the debts are written
    grouped: bool = False  # its last batch went to a batch handler: claim by GROUP_TARGET_SECONDS
    waits: list[float] = field(default_factory=list)  # pickup latencies not yet counted (metrics)

    def owes(self) -> bool:
        return self.connection_lost or bool(self.acks or self.failures or self.unstarted)


class Worker:
    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        burst: bool = False,
        config: QueueConfig | None = None,
        using: str | None = None,
        install_signal_handlers: bool = True,
    ) -> None:
        self.config = config or QueueConfig.from_settings()
        self.queues = list(queues) if queues else None
        self.concurrency = max(1, concurrency or self.config.concurrency)
        self.burst = burst
        self.using = using or queue_database()  # the queue's statements
        # Handlers run on `default` (the apps' database); with the queue apart, their thread also holds a
        # connection to the queue's database (enqueue, mark_completed), reset with it after every job.
        self.handler_using = DEFAULT_DB_ALIAS
        self.worker_id = new_worker_id()
        self.stopping = threading.Event()
        self.signal = WorkSignal(self.concurrency)
        self._lock = threading.Lock()
        self._busy = 0  # executors holding a batch (burst mode exits when none are)
        self._restart = False
        self._restart_grace: float | None = None  # how long a restart waits for the other handlers
        self._last_tick = time.monotonic()
        self._last_cpu = time.process_time()
        self._paused = 0.0  # seconds this process was seen paused (not counted in any handler's time)
        self._install_signals = install_signal_handlers
        self._listeners: list[NotificationListener] = []
        self._outboxes: list[str] = []  # the callers' databases whose outboxes this worker moves (the queue apart)
        self._outbox_wake = threading.Event()  # set by a NOTIFY on a caller's database: outbox rows committed
        self._maintenance: list[MaintenanceService] = []  # stopped when the executors have
        self._metrics: MetricsFlush | None = None  # stopped last: its final flush counts the last acknowledgements
        self._executors = [_Executor(i) for i in range(self.concurrency)]

    # --- the main thread ---------------------------------------------------------
    def run(self) -> int:
        if self._install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        self._start_maintenance()
        for executor in self._executors:
            executor.thread = threading.Thread(
                target=self._executor, args=(executor,), name=f"executor-{executor.index}", daemon=True
            )
            executor.thread.start()

        tick = min(0.1, self.config.poll_interval)
        exit_code = 0
        self._last_tick, self._last_cpu = time.monotonic(), time.process_time()
        while not self.stopping.is_set():
            self._tick(tick)
            if self.burst and not any(e.thread.is_alive() for e in self._executors):
                break
            if not self.burst and not all(e.thread.is_alive() for e in self._executors):
                # An executor can only end by a bug; a worker short of executors looks healthy but is not.
                log.error("worker %s lost an executor thread; stopping so a supervisor restarts it", self.worker_id)
                exit_code = 1
                self.stop()
                break
            self.stopping.wait(tick)
        return self._shutdown() or exit_code

    def _start_maintenance(self) -> None:
        """Start the listeners and the maintenance services. The accounts' limits are repaired before the first
        claim (a crash between two databases' commits is healed), in the service's thread: the main thread
        holds no connection."""
        databases = (self.using, self.handler_using)
        every = max(0.5, self.config.poll_interval)
        repair = LimitsRepair(databases=databases)
        repair.start()
        repair.first_pass.wait(QUEUE_STATEMENT_TIMEOUT)
        self._maintenance.append(repair)
        outboxes = self._outboxes = outboxes_to_move(self.using, self.handler_using)
        if not self.burst:
            self._start_listeners()
            self._maintenance += [
                OutboxMover(alias=alias, using=self.using, wake=self._outbox_wake, every=self.config.poll_interval)
                for alias in outboxes
            ]
        log.info(
            "worker %s started: queues=%s concurrency=%d burst=%s",
            self.worker_id,
            ",".join(self.queues) if self.queues else "all",
            self.concurrency,
            self.burst,
        )
        self._maintenance += [
            LeaseRescue(using=self.using, handler_using=self.handler_using, every=every),
            CronFiring(using=self.using, every=every, databases=databases),
        ]
        if self.config.vacuum and not self.burst and connections[self.using].vendor == "postgresql":
            self._maintenance.append(QueueVacuuming(using=self.using, outboxes=outboxes))
        self._metrics = MetricsFlush(
            using=self.using,
            worker_id=self.worker_id,
            interval=self.config.metrics_interval,
            every=every,
            databases=databases,
        )
        for service in [*self._maintenance, self._metrics]:
            service.start()

    def _start_listeners(self) -> None:
        """LISTEN for committed enqueues on the queue's database, and for the apps' channels on `default`
        (where their changes commit): one connection when the queue shares `default`, two when it is apart."""
        queue_connection, apps_connection = connections[self.using], connections[self.handler_using]
        shared = self.using == self.handler_using
        if queue_connection.vendor == "postgresql":
            self._listeners.append(
                NotificationListener(
                    queue_connection,
                    self.queues,
                    on_wake=self.signal.wake,
                    on_connect=self.signal.wake_all,
                    channels=notifications.registered_channels() if shared else (),
                    on_channel=notifications.deliver,
                    on_listening=notifications.set_listening if shared else (lambda active: None),
                )
            )
        if not shared and apps_connection.vendor == "postgresql":
            self._listeners.append(
                NotificationListener(
                    apps_connection,
                    None,
                    on_wake=lambda count: self._outbox_wake.set(),
                    on_connect=self._outbox_wake.set,
                    channels=notifications.registered_channels(),
                    on_channel=notifications.deliver,
                    on_listening=notifications.set_listening,
                    wake_channel=OUTBOX_CHANNEL,  # a job committed to default's outbox: move it
                )
            )
        for listener in self._listeners:
            listener.start()

    def _close_thread_connections(self) -> None:
        """Close this thread's connections to the queue's database and the handlers' (one when shared)."""
        close_thread_connections(self.using, self.handler_using)

    def _reset_handler(self, handler_connection, *, force: bool = False) -> bool:
        """Leave the handler's connections clean for the next job; True when one had a transaction left open."""
        return reset_handler_connections(self.handler_using, self.using, force=force)

    def stop(self, signum: int | None = None, frame: object = None) -> None:
        if signum is not None and self._restart:  # a signal during a restart: the supervisor wants us gone
            self._restart = False
        if not self.stopping.is_set():
            log.info("worker %s stopping: no new claims; grace %.0f s", self.worker_id, self.config.shutdown_grace)
        self.stopping.set()
        self.signal.wake_all()

    def _tick(self, tick: float) -> None:
        """One turn of the main thread: notice a pause, then enforce the handlers' deadlines."""
        self._notice_pause(tick)
        self._enforce_deadlines()

    def _notice_pause(self, tick: float) -> None:
        """SIGSTOP stops every thread while the clock runs on: after SIGCONT every handler would look overdue
        (and the worker would restart). What the process did not run is not counted in any handler's time."""
        now, cpu = time.monotonic(), time.process_time()
        gap, used = now - self._last_tick, cpu - self._last_cpu
        self._last_tick, self._last_cpu = now, cpu
        if gap < PAUSE_MIN_SECONDS or used > 0.1 * gap:
            return
        paused = gap - tick
        self._paused += paused
        with self._lock:
            for e in self._executors:
                if e.running:
                    e.running.deadline += paused
                    e.running.hard_deadline += paused
        log.warning(
            "worker %s was paused for %.1f s (SIGSTOP or a frozen host); the handlers' time does not count it",
            self.worker_id,
            paused,
        )

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        with self._lock:
            overdue = [e.running for e in self._executors if e.running and now >= e.running.deadline]
            for running in overdue:
                if not running.interrupted and not running.returned:
                    running.interrupted = True
                    _raise_in_thread(running.thread_id, _Interrupt)
                    cancel_statement(running.handler_connection)
        for running in overdue:
            if now >= running.hard_deadline and not running.runaway and not running.returned:
                self._runaway(running)

    def _runaway(self, running: _Running) -> None:
        """The handler ignored its interruption (blocked in C code). Record the failed attempt while this worker
        holds the lease, due again no sooner than this process is surely gone; then replace the process (unless
        it is stopping anyway). The job cannot start elsewhere meanwhile, so the other handlers get the whole
        JOB_SHUTDOWN_GRACE to finish; only a timeout that could not be recorded shortens it (the process must
        then be gone before the lease passes)."""
        running.runaway = True
        restart = not self._restart and not self.stopping.is_set()
        log.error(
            "job %s (%s) did not stop after its timeout; %s",
            running.job.id,
            running.job.handler,
            "this worker restarts" if restart else "it is left behind when this worker stops",
        )
        lease_left = running.claimed_at + self.config.lease_seconds - time.monotonic()
        not_before = max(lease_left, self.config.shutdown_grace + RUNAWAY_SLACK_SECONDS)
        written = None
        try:
            store = self._private_store(statement_seconds=5, lock_seconds=2)
            failure = self._failure(running.job, JobTimeout(self._timeout_message()), time.time(), not_before)
            written = self._write_failure(store, failure)
            store.connection.close()
        except DatabaseError as exc:  # the lease will pass and the job be rescued, the attempt counted
            log.error("could not record the timeout of job %s: %s", running.job.id, format_error(exc))
        if restart:
            self._restart = True
            if written:
                self._restart_grace = self.config.shutdown_grace
            else:
                self._restart_grace = min(self.config.shutdown_grace, self.config.lease_margin / 3)
            self.stop()

    def _shutdown(self) -> int:
        self.stopping.set()
        self.signal.wake_all()
        for service in self._maintenance:
            service.request_stop()  # no new pass; waited for once the executors have finished
        grace = self._restart_grace if self._restart and self._restart_grace is not None else None
        grace = self.config.shutdown_grace if grace is None else grace
        tick = min(0.1, self.config.poll_interval)
        paused_before = self._paused
        deadline = time.monotonic() + grace
        while True:  # deadlines still hold while the others finish; a runaway handler is not waited for
            self._tick(tick)
            left = deadline + (self._paused - paused_before) - time.monotonic()
            waiting = [e for e in self._executors if e.thread.is_alive() and not (e.running and e.running.runaway)]
            if not waiting or left <= 0:
                break
            waiting[0].thread.join(min(tick, left))
        stuck = [e for e in self._executors if e.thread.is_alive()]
        if stuck:  # past the grace: interrupt what still runs, give it a moment to unwind
            with self._lock:
                for e in stuck:
                    if e.running and not e.running.returned:
                        _raise_in_thread(e.running.thread_id, _Interrupt)
                        cancel_statement(e.running.handler_connection)
            for e in stuck:
                e.thread.join(1.0)
        for listener in self._listeners:
            listener.stop()
        stop_all(self._maintenance)  # their passes in flight end before this process lets go of the queue
        self._finish_leftovers(still_running=any(e.thread.is_alive() for e in self._executors))
        if self._metrics is not None:
            self._metrics.stop()  # last: what the leftovers' acknowledgements counted is flushed too
        log.info("worker %s stopped", self.worker_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        if self._restart:
            os.execv(sys.executable, sys.orig_argv)  # noqa: S606 - replace this process with a fresh one
        if any(e.thread.is_alive() for e in self._executors):
            os._exit(0)  # a handler still runs in a thread: leave now, before it can do anything more
        return 0

    def _finish_leftovers(self, *, still_running: bool) -> None:
        """Acknowledge what finished, then put back what did not, uncounted. A handler that may still be
        running gets its job back a little later, so no other worker starts it before this process is gone."""
        with self._lock:
            acks = [a for e in self._executors for a in e.acks]
            failures = [f for e in self._executors for f in e.failures]
            for e in self._executors:
                e.acks.clear()
                e.failures.clear()
        try:
            store = self._private_store(statement_seconds=10, lock_seconds=5)
            for failure in failures:
                self._write_failure(store, failure)
            if acks and not self._acknowledge(store, acks):
                log.error("%d completed jobs were not acknowledged: they run again after their lease", len(acks))
            released = store.release(self.worker_id, delay=2.0 if still_running else 0.0)
            store.connection.close()
        except DatabaseError as exc:  # the leases will pass and the jobs be rescued
            log.error("could not release running jobs: %s", format_error(exc))
            return
        for job_id in released:
            log.info("job %s released to pending (shutdown; the attempt does not count)", job_id)

    def _timeout_message(self) -> str:
        return f"handler exceeded JOB_EXECUTION_TIMEOUT ({self.config.execution_timeout:g} s)"

    def _private_store(self, *, statement_seconds: float, lock_seconds: float) -> JobStore:
        return store_for(private_connection(self.using, statement_seconds=statement_seconds, lock_seconds=lock_seconds))

    def _dead_letter(self, letter: DeadLetter) -> None:
        tell_hook(letter, queue_using=self.using, handler_using=self.handler_using)

    # --- executor threads ---------------------------------------------------------
    def _executor(self, executor: _Executor) -> None:
        store: JobStore | None = None
        duration = 0.0  # moving average of a job's run time, sizes the next claim
        failures = 0
        try:
            while not self.stopping.is_set():
                try:
                    if store is None:
                        store = self._private_store(
                            statement_seconds=QUEUE_STATEMENT_TIMEOUT, lock_seconds=QUEUE_LOCK_TIMEOUT
                        )
                    if executor.owes() and not self._write_owed(store, executor):
                        raise _QueueUnreachable("the database is still unreachable")
                    with self._lock:
                        self._busy += 1
                    try:
                        batch = store.claim(
                            self.worker_id,
                            self.queues,
                            _batch_limit(
                                duration,
                                self.config.batch_size,
                                GROUP_TARGET_SECONDS if executor.grouped else BATCH_TARGET_SECONDS,
                            ),
                            self.config.lease_seconds,
                        )
                        if batch:
                            duration = self._run_batch(store, executor, batch, duration)
                    finally:
                        with self._lock:
                            self._busy -= 1
                    failures = 0
                except Exception as exc:
                    failures += 1
                    log.warning("executor %d: %s; reconnecting", executor.index, format_error(exc))
                    if store is not None:
                        store.connection.close()
                        store = None
                    self._close_thread_connections()  # the handlers' connection went with it: start afresh
                    self.stopping.wait(reconnect_after(failures))
                    continue
                if not batch:
                    with self._lock:
                        others_busy = self._busy > 0
                    if self.burst and not others_busy and not drain_outboxes(self._outboxes, self.using):
                        return  # nothing due, nothing running, nothing committed in an outbox
                    self.signal.wait(0.05 if self.burst else self.config.poll_interval)
        finally:
            if store is not None:
                try:
                    self._flush_acks(store, executor)  # what it cannot write, _finish_leftovers tries again
                finally:
                    store.connection.close()
            self._close_thread_connections()

    def _run_batch(self, store: JobStore, executor: _Executor, batch: list[ClaimedJob], duration: float) -> float:
        claimed_at = time.monotonic()
        left, duration = self._run_together(store, executor, batch, claimed_at, duration)
        if left is not batch:
            # What a batch handler handed back was not waiting unstarted while it ran: its hold starts now,
            # or a batch that gave everything back (one failing action) would release all but one job.
            claimed_at = time.monotonic()
        batch = left
        for position, job in enumerate(batch):
            if executor.connection_lost:
                # The database went away: start nothing more. Give the rest back once it is reachable again.
                executor.unstarted.extend(j.id for j in batch[position:])
                break
            if self.stopping.is_set() or (position and time.monotonic() - claimed_at > self._hold_limit()):
                # Give back what this executor did not start: to other workers, or to the next start.
                self._flush_acks(store, executor)
                self._give_back(store, executor, [j.id for j in batch[position:]])
                break
            if executor.acks and time.time() - executor.acks[0].finished > ACK_DELAY_SECONDS:
                self._flush_acks(store, executor)
            finished = self._run_job(store, executor, job, claimed_at)
            if finished is not None:
                with self._lock:
                    executor.acks.append(finished)
                duration = 0.8 * duration + 0.2 * (finished.finished - finished.started)
        self._flush_acks(store, executor)
        return duration

    def _give_back(self, store: JobStore, executor: _Executor, job_ids: list) -> None:
        """Release claimed jobs this executor did not start (uncounted); kept for later if it cannot now."""
        if executor.connection_lost:
            executor.unstarted.extend(job_ids)
            return
        try:
            store.release(self.worker_id, job_ids)
        except DatabaseError as exc:
            log.warning("could not give back %d unstarted jobs yet: %s; kept", len(job_ids), format_error(exc))
            store.connection.close()
            executor.unstarted.extend(job_ids)
            executor.connection_lost = True

    def _write_owed(self, store: JobStore, executor: _Executor) -> bool:
        """Write what the executor kept while the database was unreachable; False if it still is."""
        executor.connection_lost = False
        owed = (len(executor.failures), len(executor.acks), len(executor.unstarted))
        failures, executor.failures = executor.failures, []
        for position, failure in enumerate(failures):
            if self._write_failure(store, failure, executor) is None:
                executor.failures.extend(failures[position + 1 :])
                return False
        self._flush_acks(store, executor)
        if executor.connection_lost:
            return False
        unstarted, executor.unstarted = executor.unstarted, []
        self._give_back(store, executor, unstarted)
        if executor.connection_lost:
            return False
        if any(owed):
            log.warning(
                "executor %d: the database is reachable again; wrote %d failed attempts and %d completions,"
                " gave back %d unstarted jobs",
                executor.index,
                *owed,
            )
        return True

    def _hold_limit(self) -> float:
        """How long an executor may keep claimed jobs it has not started."""
        return min(1.0, self.config.lease_margin / 4)

    def _run_together(
        self, store: JobStore, executor: _Executor, batch: list[ClaimedJob], claimed_at: float, duration: float
    ) -> tuple[list[ClaimedJob], float]:
        """Give the jobs of a handler with a batch handler to it together; returns the jobs left to run
        one by one, and the moving average of a job's run time."""
        together: dict[str, list[ClaimedJob]] = {}
        for job in batch:
            if get_batch_handler(job.handler) is not None:
                together.setdefault(job.handler, []).append(job)
        executor.grouped = any(len(jobs) > 1 for jobs in together.values())
        if self.stopping.is_set() or not executor.grouped:
            return batch, duration
        left = [job for job in batch if len(together.get(job.handler, ())) < 2]
        for handler, jobs in together.items():
            if len(jobs) < 2:
                continue  # already in `left`
            if self.stopping.is_set():
                left.extend(jobs)  # the loop after gives them back
                continue
            started = time.monotonic()
            left.extend(self._run_group(store, executor, handler, jobs, claimed_at))
            duration = 0.8 * duration + 0.2 * (time.monotonic() - started) / len(jobs)
        return left, duration

    def _run_group(
        self, store: JobStore, executor: _Executor, handler: str, jobs: list[ClaimedJob], claimed_at: float
    ) -> list[ClaimedJob]:
        """One call of a batch handler, under one deadline. Returns the jobs to run one by one: those it
        left, or, if it failed, every job whose completion did not commit."""
        started = time.time()
        executor.waits.extend([started - _epoch(job.run_at) for job in jobs])
        handler_connection = connections[self.handler_using]
        contexts = [self._context(job, started, handler_connection) for job in jobs]
        running = self._running(jobs[0], handler_connection, claimed_at)
        error: BaseException | None = None
        left: Sequence[tuple[dict, JobContext]] = ()
        items = [(Payload(job.payload), context) for job, context in zip(jobs, contexts, strict=True)]
        try:
            left = self._supervised(executor, running, lambda: get_batch_handler(handler)(items)) or ()
        except _DeadlinePassed:
            error = JobTimeout(self._timeout_message())
        except Exception as exc:
            error = exc
        self._reset_handler(handler_connection, force=error is not None)
        runaway = running.job.id if running.runaway else None  # its timeout was recorded: nothing more of it
        pending = [
            (job, context)
            for job, context in zip(jobs, contexts, strict=True)
            if not context.completed_in_transaction and job.id != runaway
        ]
        # A committed completion is a success, the runaway's too: its timeout then found the job no longer
        # running and recorded nothing (a completion and a recorded failure exclude each other).
        metrics.count(metrics.ATTEMPT_SUCCEEDED, sum(1 for c in contexts if c.completed_in_transaction))
        if isinstance(error, JobTimeout):
            for job, _context in pending:
                self._record_failure(store, job, error, started, executor=executor)
            return []
        if isinstance(error, LeaseLost) and error.lost:
            # As for one job: an attempt this worker no longer holds is discarded, never run again here
            # (another worker has it). The others of the batch run one by one.
            log.warning("batch handler %s: %s; their outcomes are discarded", handler, error)
            pending = [(job, context) for job, context in pending if job.id not in error.lost]
        if error is not None:
            log.warning(
                "batch handler %s failed on %d jobs (%s); running them one by one",
                handler,
                len(jobs),
                format_error(error),
            )
            return [job for job, _context in pending]
        left_ids = {context.id for _payload, context in left}
        finished = time.time()
        with self._lock:
            executor.acks.extend(
                Finished(job.id, job.attempt_number, started, finished) for job, c in pending if c.id not in left_ids
            )
        return [job for job, context in pending if context.id in left_ids]

    def _supervised(self, executor: _Executor, running: _Running, call: Callable[[], _T]) -> _T | None:
        """Run `call` as the executor's handler, which the main thread interrupts at its deadline: that
        surfaces here as _DeadlinePassed (a late interruption of a call that had returned is ignored)."""
        result = None
        try:
            try:
                with self._lock:
                    executor.running = running
                result = call()
                running.returned = True
            finally:
                with self._lock:
                    executor.running = None
                    if running.interrupted:
                        _raise_in_thread(running.thread_id, None)  # cancel an interruption that came too late
        except _Interrupt:
            with self._lock:  # it may have landed inside the cleanup above
                executor.running = None
            if not running.returned:
                raise _DeadlinePassed from None
        return result

    def _context(self, job: ClaimedJob, started: float, handler_connection) -> JobContext:
        # mark_completed writes on this thread's connection to the queue's database (the handler's own when
        # the queue shares `default`), so it joins the handler's transaction there.
        return context_for(job, store_for(connections[self.using]), self.worker_id, started)

    def _running(self, job: ClaimedJob, handler_connection, claimed_at: float) -> _Running:
        now = time.monotonic()
        deadline = min(
            now + self.config.execution_timeout, claimed_at + self.config.execution_timeout + self._hold_limit()
        )
        return _Running(
            job,
            threading.get_ident(),
            handler_connection,
            claimed_at,
            deadline,
            deadline + self.config.lease_margin / 3,
        )

    def _run_job(self, store: JobStore, executor: _Executor, job: ClaimedJob, claimed_at: float) -> Finished | None:
        started = time.time()
        executor.waits.append(started - _epoch(job.run_at))
        handler_connection = connections[self.handler_using]
        context = self._context(job, started, handler_connection)
        running = self._running(job, handler_connection, claimed_at)
        error: BaseException | None = None
        try:
            handler = get_handler(job.handler)
            self._supervised(executor, running, lambda: handler(Payload(job.payload), context))
        except _DeadlinePassed:
            error = JobTimeout(self._timeout_message())
        except UnknownHandler as exc:
            error = PermanentError(str(exc))
        except LeaseLost as exc:
            log.warning("job %s %s: %s; its outcome is discarded", job.id, job.handler, exc)
            self._reset_handler(handler_connection)
            return None
        except Exception as exc:
            error = exc
        if running.runaway:  # its timeout was recorded when it did not stop: whatever it did since is not its own
            self._reset_handler(handler_connection, force=True)
            if context.completed_in_transaction:  # it completed first: its timeout found nothing to record
                metrics.count(metrics.ATTEMPT_SUCCEEDED)
            log.info("job %s %s returned after its timeout was recorded; nothing more is written", job.id, job.handler)
            return None
        if error is not None:
            self._reset_handler(handler_connection, force=True)
            self._record_failure(store, job, error, started, executor=executor)
            return None
        if self._reset_handler(handler_connection):
            log.error("job %s %s left a transaction open; it was rolled back", job.id, job.handler)
        if context.completed_in_transaction:
            metrics.count(metrics.ATTEMPT_SUCCEEDED)
            log.info("job %s %s completed in %.1f ms", job.id, job.handler, (time.time() - started) * 1000)
            return None
        return Finished(job.id, job.attempt_number, started, time.time())

    def _flush_acks(self, store: JobStore, executor: _Executor) -> None:
        """Acknowledge the executor's completed jobs; what cannot be written now is kept for later."""
        if executor.waits:  # counted once per batch, not per job (in this process: no database needed)
            waits, executor.waits = executor.waits, []
            metrics.observe_pickup(waits)
        if executor.connection_lost:
            return
        with self._lock:
            done, executor.acks = executor.acks, []
        if not self._acknowledge(store, done):
            with self._lock:
                executor.acks[:0] = done
            executor.connection_lost = True

    def _acknowledge(self, store: JobStore, done: list[Finished]) -> bool:
        """Write completions; False (and the connection closed) when the database could not be reached."""
        if not done:
            return True
        try:
            acked = store.complete(self.worker_id, done)
        except DatabaseError as exc:
            log.warning("could not acknowledge %d completed jobs yet: %s; kept", len(done), format_error(exc))
            store.connection.close()
            return False
        metrics.count(metrics.ATTEMPT_SUCCEEDED, len(acked))
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
        return True

    def _record_failure(
        self,
        store: JobStore,
        job: ClaimedJob,
        exc: BaseException,
        started: float,
        not_before: float = 0.0,
        executor: _Executor | None = None,
    ) -> None:
        """Decide what the failed attempt leads to and write it; an executor keeps it if it cannot be written."""
        failure = self._failure(job, exc, started, not_before)
        if executor is not None and executor.connection_lost:
            executor.failures.append(failure)
            return
        self._write_failure(store, failure, executor)

    def _failure(self, job: ClaimedJob, exc: BaseException, started: float, not_before: float = 0.0) -> _Failure:
        """The failed attempt, classified once, and what it leads to: a retry (after its delay), failed, dead."""
        error = classify(exc)
        decision = self.config.retry.decide(
            attempt_number=job.attempt_number, error=error, max_attempts=job.max_attempts
        )
        delay = decision.delay if decision.delay is None else max(decision.delay, not_before)
        if log.isEnabledFor(logging.DEBUG):  # frames only: exception messages may carry secrets
            log.debug("job %s raised %s at\n%s", job.id, error.message, "".join(traceback.format_tb(exc.__traceback__)))
        return _Failure(job, error, decision, delay, started)

    def _write_failure(self, store: JobStore, failure: _Failure, executor: _Executor | None = None) -> bool | None:
        """Write a decided failure: True when written, False when this worker no longer holds the job, None
        when the database could not be reached (an executor keeps it, to write it once the database is back)."""
        job, error, decision, delay = failure.job, failure.error, failure.decision, failure.delay
        try:
            written = store.fail(
                self.worker_id,
                job.id,
                job.attempt_number,
                status=decision.status.value,
                error=error.message,
                delay=delay,
                started=failure.started,
            )
        except DatabaseError as exc2:
            store.connection.close()
            if executor is None:
                log.error("could not record failure of job %s: %s", job.id, format_error(exc2))
                return None
            log.warning("could not record the failure of job %s yet: %s; kept", job.id, format_error(exc2))
            executor.failures.append(failure)
            executor.connection_lost = True
            return None
        if written:
            metrics.count(metrics.ATTEMPT_RETRIED if decision.will_retry else metrics.ATTEMPT_DEAD_LETTERED)
        if not written:
            log.warning("job %s failure not recorded: this worker no longer holds its lease", job.id)
            return False
        elif decision.will_retry:
            log.warning(
                "job %s %s attempt %d/%d failed (%s), retrying in %.1f s: %s",
                job.id,
                job.handler,
                job.attempt_number,
                job.max_attempts,
                error.category,
                delay,
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
            self._dead_letter(DeadLetter(job.id, job.handler, job.payload, decision.status.value, error.message))
        return True


def _epoch(value: object) -> float:
    """A claimed row's due time in epoch seconds (PostgreSQL gives datetimes, SQLite text)."""
    try:
        return value.timestamp()  # type: ignore[attr-defined]
    except AttributeError:
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value)
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
        return time.time()


def _batch_limit(average_duration: float, batch_size: int, target: float = BATCH_TARGET_SECONDS) -> int:
    """Claim what this executor will start soon: many fast jobs, one slow job."""
    if average_duration <= 0:
        return min(batch_size, 10)
    return max(1, min(batch_size, int(target / average_duration)))


def _raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Raise `exc_type` inside another thread at its next Python instruction (None cancels)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )
