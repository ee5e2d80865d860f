"""The worker process (`python manage.py runworker`): its parts put together, and its main thread.

The main thread touches no database in normal operation: it installs the signal handlers, starts the
services and the executors, then ticks (pauses noticed, deadlines enforced) until the worker stops, and
shuts it down. An executor can only end by a bug: a worker short of one stops with exit code 1, so a
supervisor restarts it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence

from jobs.application.config import QueueConfig
from jobs.application.worker.acknowledge import Acknowledgements
from jobs.application.worker.attempts import Attempts
from jobs.application.worker.deadlines import Deadlines
from jobs.application.worker.failures import Failures
from jobs.application.worker.groups import Groups
from jobs.application.worker.loop import Loop
from jobs.application.worker.setup import Services, start_services
from jobs.application.worker.shutdown import Shutdown
from jobs.application.worker.state import Executor, WorkerState

log = logging.getLogger("relay.worker")


class Worker:
    """One worker: `concurrency` executor threads claiming from `queues` (None: all), until stopped; with
    `burst`, until nothing is due, running or committed in an outbox. `run()` returns the exit code."""

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
        self.state = state = WorkerState(
            queues=queues, concurrency=concurrency, burst=burst, config=config, using=using
        )
        self.failures = Failures(state)
        self.acks = Acknowledgements(state, self.failures)
        self.deadlines = Deadlines(state, self.failures)
        self.attempts = Attempts(state, self.deadlines, self.failures)
        self.loop = Loop(state, self.attempts, Groups(state, self.attempts, self.deadlines, self.failures), self.acks)
        self.shutdown = Shutdown(state, self.deadlines, self.acks, self.failures)
        self.services = Services()
        self._install_signals = install_signal_handlers

    @property
    def worker_id(self) -> str:
        return self.state.worker_id

    @property
    def executors(self) -> list[Executor]:
        return self.state.executors

    def stop(self, signum: int | None = None, frame: object = None) -> None:
        """Stop claiming; running handlers finish within the grace period (a signal handler)."""
        self.state.stop(signum, frame)

    def run(self) -> int:
        state = self.state
        if self._install_signals and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        start_services(state, self.services)
        for executor in state.executors:
            executor.thread = threading.Thread(
                target=self.loop.run, args=(executor,), name=f"executor-{executor.index}", daemon=True
            )
            executor.thread.start()

        tick = min(0.1, state.config.poll_interval)
        exit_code = 0
        self.deadlines.start_clock()
        while not state.stopping.is_set():
            self.deadlines.tick(tick)
            if state.burst and not any(e.is_alive() for e in state.executors):
                break
            if not state.burst and not all(e.is_alive() for e in state.executors):
                # An executor can only end by a bug; a worker short of executors looks healthy but is not.
                log.error("worker %s lost an executor thread; stopping so a supervisor restarts it", state.worker_id)
                exit_code = 1
                self.stop()
                break
            state.stopping.wait(tick)
        return self.shutdown.run(self.services) or exit_code
