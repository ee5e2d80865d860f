"""The outbox mover (with the queue in its own database): jobs committed to a caller database's outbox are
moved to the queue (jobs.application.outbox.move_batch).

One mover per caller database in every worker; SKIP LOCKED shares the rows between them. It is woken by a
NOTIFY on that database (the worker's listener there sets `wake`) and polls every poll interval as the
fallback; a full batch is followed by the next at once. Burst mode has no listener: it drains the outboxes
(`drain_outboxes`) before it ends instead.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import connections

from jobs.application import outbox
from jobs.application.config import QUEUE_STATEMENT_TIMEOUT, reconnect_after
from jobs.application.maintenance.service import MaintenanceService
from jobs.infrastructure.database import caller_databases
from jobs.infrastructure.store import private_connection


def outboxes_to_move(using: str, handler_using: str) -> list[str]:
    """The callers' databases whose outboxes a worker moves to the queue on `using` (none when the queue
    shares `default`, or on SQLite: the queue apart needs PostgreSQL)."""
    if using == handler_using or connections[using].vendor != "postgresql":
        return []
    return [alias for alias in caller_databases() if connections[alias].vendor == "postgresql"]


def _connect(alias: str) -> Any:
    return private_connection(alias, statement_seconds=QUEUE_STATEMENT_TIMEOUT, lock_seconds=2)


class OutboxMover(MaintenanceService):
    """Moves `alias`'s outbox rows to the queue as they commit."""

    name = "outbox"

    def __init__(self, *, alias: str, using: str, wake: threading.Event, every: float = 1.0) -> None:
        super().__init__(every=every)
        self.name = f"outbox-{alias}"  # one thread per database, named after it
        self.alias = alias
        self.using = using
        self.wake = wake  # set by a NOTIFY on `alias`: outbox rows committed
        self._source: Any = None
        self._queue: Any = None

    def run_once(self) -> float | None:
        if self._source is None or self._queue is None:
            self._source, self._queue = _connect(self.alias), _connect(self.using)
        self.wake.clear()  # a notification from now on wakes the wait that follows
        moved = outbox.move_batch(self._source, self._queue)
        return 0.0 if moved >= outbox.MOVE_BATCH else None  # more are waiting: at once

    def idle(self, seconds: float) -> None:
        self.wake.wait(seconds)

    def retry_after(self, failures: int) -> float:
        return reconnect_after(failures)

    def request_stop(self) -> None:
        super().request_stop()
        self.wake.set()  # end the wait for a notification now

    def drop_connections(self) -> None:
        for connection in (self._source, self._queue):
            if connection is not None:
                connection.close()
        self._source = self._queue = None


def drain_outboxes(aliases: list[str], using: str) -> int:
    """Move what these outboxes hold now (burst mode, before it ends: no listener wakes their movers), so
    the jobs that ran queue what follows them and the worker runs it too. Returns the rows moved."""
    moved = 0
    for alias in aliases:
        source, queue = _connect(alias), _connect(using)
        try:
            while batch := outbox.move_batch(source, queue):
                moved += batch
        finally:
            source.close()
            queue.close()
    return moved
