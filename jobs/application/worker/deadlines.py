"""Deadlines: a handler runs at most JOB_EXECUTION_TIMEOUT, and the main thread enforces it.

An executor puts its handler under a deadline (`supervised`); every tick the main thread interrupts the
handlers past theirs (an exception raised in their thread, their statement cancelled), and records the
timeout itself of one that ignores it (a runaway, blocked in C code), then has the process replaced. A tick
that comes late while the process used no CPU was a pause (SIGSTOP, a frozen host): it moves every deadline
on, so no handler's time counts it.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import Error as DatabaseError

from jobs.application.config import QueueConfig
from jobs.application.worker.failures import Failures
from jobs.application.worker.state import Executor, Running, WorkerState
from jobs.infrastructure.connections import cancel_statement
from jobs.infrastructure.store import ClaimedJob
from kernel.failures import JobTimeout, format_error

log = logging.getLogger("relay.worker")

# A main-thread tick this late while the process used almost no CPU was a pause (SIGSTOP, a frozen host), not
# a slow handler: no handler's time counts it. A handler hogging the GIL in C code delays the tick too, but
# burns CPU meanwhile, so it is still stopped at its deadline.
PAUSE_MIN_SECONDS = 1.0
# A handler that ignored its interruption: its job is due again no sooner than this process is surely gone
# (the shutdown grace, plus this), so no other worker can start it while the handler still runs here.
RUNAWAY_SLACK_SECONDS = 5.0

_T = TypeVar("_T")


class Interrupt(BaseException):
    """Raised inside a handler's thread at its deadline. A BaseException, so `except Exception` in a
    handler cannot swallow it."""


class DeadlinePassed(Exception):
    """A handler (or batch handler) the main thread interrupted at its deadline: recorded as JobTimeout."""


def timeout_message(config: QueueConfig) -> str:
    return f"handler exceeded JOB_EXECUTION_TIMEOUT ({config.execution_timeout:g} s)"


def hold_limit(config: QueueConfig) -> float:
    """How long an executor may keep claimed jobs it has not started."""
    return min(1.0, config.lease_margin / 4)


def raise_in_thread(thread_id: int, exc_type: type[BaseException] | None) -> None:
    """Raise `exc_type` inside another thread at its next Python instruction (None cancels)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc_type) if exc_type else None
    )


class Deadlines:
    """The executors' side (`running_for`, `supervised`) and the main thread's (`tick`)."""

    def __init__(self, state: WorkerState, failures: Failures) -> None:
        self.state = state
        self.failures = failures
        self.last_tick = time.monotonic()
        self.last_cpu = time.process_time()
        self.paused = 0.0  # seconds this process was seen paused (not counted in any handler's time)

    # --- an executor's handler under its deadline ----------------------------------------------------
    def running_for(self, job: ClaimedJob, handler_connection: object, claimed_at: float) -> Running:
        """The deadline of a handler starting now, for a job claimed at `claimed_at` (monotonic)."""
        config = self.state.config
        now = time.monotonic()
        deadline = min(now + config.execution_timeout, claimed_at + config.execution_timeout + hold_limit(config))
        return Running(
            job,
            threading.get_ident(),
            handler_connection,
            claimed_at,
            deadline,
            deadline + config.lease_margin / 3,
        )

    def supervised(self, executor: Executor, running: Running, call: Callable[[], _T]) -> _T | None:
        """Run `call` as the executor's handler, which the main thread interrupts at its deadline: that
        surfaces here as DeadlinePassed (a late interruption of a call that had returned is ignored)."""
        lock = self.state.lock
        result = None
        try:
            try:
                with lock:
                    executor.running = running
                result = call()
                running.returned = True
            finally:
                with lock:
                    executor.running = None
                    if running.interrupted:
                        raise_in_thread(running.thread_id, None)  # cancel an interruption that came too late
        except Interrupt:
            with lock:  # it may have landed inside the cleanup above
                executor.running = None
            if not running.returned:
                raise DeadlinePassed from None
        return result

    # --- the main thread ---------------------------------------------------------------------------------
    def start_clock(self) -> None:
        """The main thread's ticks start now (the time before them was no pause)."""
        self.last_tick, self.last_cpu = time.monotonic(), time.process_time()

    def tick(self, tick: float) -> None:
        """One turn of the main thread: notice a pause, then enforce the handlers' deadlines."""
        self.notice_pause(tick)
        self.enforce()

    def notice_pause(self, tick: float) -> None:
        """SIGSTOP stops every thread while the clock runs on: after SIGCONT every handler would look overdue
        (and the worker would restart). What the process did not run is not counted in any handler's time."""
        now, cpu = time.monotonic(), time.process_time()
        gap, used = now - self.last_tick, cpu - self.last_cpu
        self.last_tick, self.last_cpu = now, cpu
        if gap < PAUSE_MIN_SECONDS or used > 0.1 * gap:
            return
        paused = gap - tick
        self.paused += paused
        with self.state.lock:
            for e in self.state.executors:
                if e.running:
                    e.running.deadline += paused
                    e.running.hard_deadline += paused
        log.warning(
            "worker %s was paused for %.1f s (SIGSTOP or a frozen host); the handlers' time does not count it",
            self.state.worker_id,
            paused,
        )

    def enforce(self) -> None:
        """Interrupt every handler past its deadline; record the timeout of one past its hard deadline."""
        now = time.monotonic()
        with self.state.lock:
            overdue = [e.running for e in self.state.executors if e.running and now >= e.running.deadline]
            for running in overdue:
                if not running.interrupted and not running.returned:
                    running.interrupted = True
                    raise_in_thread(running.thread_id, Interrupt)
                    cancel_statement(running.handler_connection)
        for running in overdue:
            if now >= running.hard_deadline and not running.runaway and not running.returned:
                self.runaway(running)

    def runaway(self, running: Running) -> None:
        """The handler ignored its interruption (blocked in C code). Record the failed attempt while this worker
        holds the lease, due again no sooner than this process is surely gone; then replace the process (unless
        it is stopping anyway). The job cannot start elsewhere meanwhile, so the other handlers get the whole
        JOB_SHUTDOWN_GRACE to finish; only a timeout that could not be recorded shortens it (the process must
        then be gone before the lease passes)."""
        state, config = self.state, self.state.config
        running.runaway = True
        restart = not state.restart and not state.stopping.is_set()
        log.error(
            "job %s (%s) did not stop after its timeout; %s",
            running.job.id,
            running.job.handler,
            "this worker restarts" if restart else "it is left behind when this worker stops",
        )
        lease_left = running.claimed_at + config.lease_seconds - time.monotonic()
        not_before = max(lease_left, config.shutdown_grace + RUNAWAY_SLACK_SECONDS)
        written = None
        try:
            store = state.private_store(statement_seconds=5, lock_seconds=2)
            failure = self.failures.decide(running.job, JobTimeout(timeout_message(config)), time.time(), not_before)
            written = self.failures.write(store, failure)
            store.connection.close()
        except DatabaseError as exc:  # the lease will pass and the job be rescued, the attempt counted
            log.error("could not record the timeout of job %s: %s", running.job.id, format_error(exc))
        if restart:
            state.restart = True
            if written:
                state.restart_grace = config.shutdown_grace
            else:
                state.restart_grace = min(config.shutdown_grace, config.lease_margin / 3)
            state.stop()
