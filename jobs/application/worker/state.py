"""What the worker's parts share: its settings and identity, the stop flag, and one record per executor.

The main thread and the executor threads meet only here, under `WorkerState.lock`: an executor says which
handler it runs (`Executor.running`, read by the deadlines) and keeps what it owes the database (`acks`,
`failures`, `unstarted`, read by the shutdown).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS

from jobs.application.config import QueueConfig
from jobs.application.worker.wake import WorkSignal
from jobs.domain.retry import RetryDecision
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.store import ClaimedJob, Finished, JobStore, private_connection, store_for
from kernel.failures import ClassifiedError

log = logging.getLogger("relay.worker")


def new_worker_id() -> str:
    """Unique per process start, so a restarted process never inherits its predecessor's leases."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class Running:
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
class Failure:
    """A failed attempt, decided (retry, failed, dead) and waiting to be written."""

    job: ClaimedJob
    error: ClassifiedError
    decision: RetryDecision
    delay: float | None
    started: float


@dataclass
class Snooze:
    """A handler snoozed its job (jobs.domain.snooze): not a failure, but written and kept as one is."""

    job: ClaimedJob
    seconds: float
    reason: str
    started: float


@dataclass
class Executor:
    index: int
    thread: threading.Thread | None = None  # set when the worker runs
    running: Running | None = None
    # What this executor owes the database. Written as soon as it can be; when the queue connection is lost
    # it is kept (never thrown away) and written once the database is back: completions, failed attempts,
    # and jobs it had claimed but not started (given back). A lease another worker took in between refuses
    # the write (the compare-and-set on every finish), so nothing is recorded twice.
    acks: list[Finished] = field(default_factory=list)  # completed, not yet acknowledged
    failures: list[Failure | Snooze] = field(default_factory=list)  # failed or snoozed, not yet recorded
    unstarted: list[UUID] = field(default_factory=list)  # ids claimed, never started, not yet given back
    connection_lost: bool = False  # a queue statement failed: start nothing more until the debts are written
    grouped: bool = False  # its last batch went to a batch handler: claim by GROUP_TARGET_SECONDS
    waits: list[float] = field(default_factory=list)  # pickup latencies not yet counted (metrics)

    def owes(self) -> bool:
        return self.connection_lost or bool(self.acks or self.failures or self.unstarted)

    def is_alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)


class WorkerState:
    """The worker's settings, identity and stop flag, and its executors' records."""

    def __init__(
        self,
        *,
        queues: Sequence[str] | None,
        concurrency: int | None,
        burst: bool,
        config: QueueConfig | None,
        using: str | None,
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
        self.wake = WorkSignal(self.concurrency)
        self.lock = threading.Lock()
        self.busy = 0  # executors holding a batch (burst mode exits when none are)
        self.restart = False
        self.restart_grace: float | None = None  # how long a restart waits for the other handlers
        self.outboxes: list[str] = []  # the callers' databases whose outboxes this worker moves (the queue apart)
        self.executors = [Executor(i) for i in range(self.concurrency)]

    def stop(self, signum: int | None = None, frame: object = None) -> None:
        """Claim nothing more; the main thread then shuts down (a signal handler, a runaway, a lost executor)."""
        if signum is not None and self.restart:  # a signal during a restart: the supervisor wants us gone
            self.restart = False
        if not self.stopping.is_set():
            log.info("worker %s stopping: no new claims; grace %.0f s", self.worker_id, self.config.shutdown_grace)
        self.stopping.set()
        self.wake.wake_all()

    def private_store(self, *, statement_seconds: float, lock_seconds: float) -> JobStore:
        """A store on a connection of its own to the queue's database, its statements and lock waits bounded."""
        return store_for(private_connection(self.using, statement_seconds=statement_seconds, lock_seconds=lock_seconds))
