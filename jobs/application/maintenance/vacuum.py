"""Vacuum: the queue's tables, the outboxes a worker moves and the tables other apps registered, vacuumed
when autovacuum does not (jobs.application.vacuum decides; jobs.domain.vacuum is the rule).

On connections of its own (one per database) with no statement timeout: a VACUUM of a big table takes as
long as it takes, and must not hold up lease rescue or cron. Stopping cancels the VACUUM in flight, which
loses nothing: the next worker's pass does it again. PostgreSQL only (the worker starts it there).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from jobs.application import vacuum
from jobs.application.config import QUEUE_LOCK_TIMEOUT
from jobs.application.maintenance.service import STOP_SECONDS, MaintenanceService
from jobs.infrastructure.connections import cancel_statement
from jobs.infrastructure.store import private_connection
from kernel.failures import format_error

log = logging.getLogger("relay.worker")


class QueueVacuuming(MaintenanceService):
    """Every CHECK_SECONDS: one pass over every database's tables (a failure on one leaves the others)."""

    name = "vacuum"

    def __init__(self, *, using: str, outboxes: Sequence[str] = (), every: float = vacuum.CHECK_SECONDS) -> None:
        super().__init__(every=every)
        self.using = using
        self.outboxes = tuple(outboxes)
        self._targets: list[tuple[str, tuple[str, ...]]] | None = None
        self._own: dict[str, Any] = {}  # database alias -> its connection
        self._passes = vacuum.QueueVacuum()
        self._vacuuming: Any = None  # the connection a VACUUM runs on now, cancelled at stop

    def run_once(self) -> None:
        if self._targets is None:
            self._targets = vacuum.tables_to_keep(self.using, self.outboxes)
        for alias, tables in self._targets:
            if self.stopping:
                break
            try:
                if alias not in self._own:
                    self._own[alias] = private_connection(alias, statement_seconds=0, lock_seconds=QUEUE_LOCK_TIMEOUT)
                self._vacuuming = self._own[alias]
                self._passes.keep_vacuumed(self._own[alias], tables)
            except Exception as exc:
                if not self.stopping:
                    log.warning("could not vacuum the queue's tables on %s: %s", alias, format_error(exc))
                broken = self._own.pop(alias, None)
                if broken is not None:
                    broken.close()
            finally:
                self._vacuuming = None

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        self.request_stop()
        running = self._vacuuming
        if running is not None:
            cancel_statement(running)
        return super().stop(timeout)

    def drop_connections(self) -> None:
        for connection in self._own.values():
            connection.close()
        self._own.clear()
