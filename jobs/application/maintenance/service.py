"""One start/stop interface for the worker's upkeep, the work it does beside its executors.

Built as River's maintenance services (`internal/maintenance`, behind `startstop`) and Oban's plugins
(lifeline, cron, pruner, stager): each service runs in a thread of its own, on connections of its own, one
pass every `every` seconds, and survives its own failures (logged, its connections dropped, tried again at
the next pass). `stop()` asks the thread to end and waits for it, so a pass in flight finishes before the
worker lets go of the queue; it is safe before `start()` and twice. Every worker runs every service: each
one's work is safe in many workers at once (SKIP LOCKED, compare-and-set), so none needs a leader.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence

from jobs.infrastructure.connections import close_thread_connections
from kernel.failures import format_error

log = logging.getLogger("relay.worker")

STOP_SECONDS = 5.0  # how long stop() waits for a pass in flight


class MaintenanceService:
    """A thread that does `run_once()` every `every` seconds until stopped.

    Subclasses give `run_once()` (one pass; it may return how long to wait before the next, 0 for at once)
    and, when they hold connections of their own, `drop_connections()` (after a failure, and at the end).
    The thread's ordinary Django connections to `databases` are closed after a failure and at the end.
    """

    name: str = "maintenance"  # its thread's name

    def __init__(self, *, every: float, databases: Sequence[str] = ()) -> None:
        self.every = every
        self.databases = tuple(databases)
        self.first_pass = threading.Event()  # set when the first pass has ended, well or not
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what a service gives -------------------------------------------------------------------------
    def run_once(self) -> float | None:
        """One pass; returns the wait before the next (None: `every`)."""
        raise NotImplementedError

    def drop_connections(self) -> None:
        """Close what may be broken after a failed pass; it is opened again at the next."""
        close_thread_connections(*self.databases)

    def close(self) -> None:
        """The thread's last act: close its connections."""
        self.drop_connections()

    def retry_after(self, failures: int) -> float:
        """The wait after `failures` failed passes in a row."""
        return self.every

    def idle(self, seconds: float) -> None:
        """Wait between two passes; ends early when the service is stopped."""
        self._stopping.wait(seconds)

    # --- start and stop -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def request_stop(self) -> None:
        """Start no new pass; returns at once (stop() waits)."""
        self._stopping.set()

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Stop and wait for the thread, at most `timeout` seconds; True when it has ended."""
        self.request_stop()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        failures = 0
        try:
            while not self._stopping.is_set():
                try:
                    wait = self.run_once()
                    failures = 0
                except Exception as exc:  # never let upkeep take the worker down
                    failures += 1
                    log.warning("%s failed, will retry: %s", self.name, format_error(exc))
                    self.drop_connections()
                self.first_pass.set()
                if failures:
                    self._stopping.wait(self.retry_after(failures))
                elif wait is None or wait > 0:
                    self.idle(self.every if wait is None else wait)
        finally:
            self.close()


def stop_all(services: Iterable[MaintenanceService], timeout: float = STOP_SECONDS) -> list[MaintenanceService]:
    """Stop services together (each is asked first, then each is waited for, within one `timeout`);
    returns those still running."""
    services = list(services)
    for service in services:
        service.request_stop()
    deadline = time.monotonic() + timeout
    return [service for service in services if not service.stop(max(0.0, deadline - time.monotonic()))]
