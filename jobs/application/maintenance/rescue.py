"""Lease rescue and expiry (Oban's lifeline, River's rescuer): jobs that will never finish where they are.

- A job whose worker died stays `running` until its lease passes; then it is put back (`pending`, the
  attempt counts) or, on its last attempt, ends `dead`, so a job that kills its worker every time ends
  instead of killing workers forever.
- A waiting job past its deadline (`expires_at`) is dead-lettered without an attempt: the claim never starts it.

Either way the handler's dead-letter hook is told of the jobs that ended. `FOR UPDATE SKIP LOCKED`: two
workers' passes never wait on each other's rows, nor on a claim's.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS

from jobs.application import metrics
from jobs.application.config import QUEUE_STATEMENT_TIMEOUT
from jobs.application.dead_letters import tell_hook
from jobs.application.maintenance.service import MaintenanceService
from jobs.application.registry import DeadLetter
from jobs.domain.states import JobStatus
from jobs.infrastructure.store import JobStore, private_connection, store_for

log = logging.getLogger("relay.worker")


class LeaseRescue(MaintenanceService):
    """Every pass: rescue expired leases, then expire overdue jobs, on a private connection to the queue."""

    name = "rescue"

    def __init__(self, *, using: str, handler_using: str = DEFAULT_DB_ALIAS, every: float = 1.0) -> None:
        super().__init__(every=every, databases=(using, handler_using))  # the hooks run on this thread's own
        self.using = using
        self.handler_using = handler_using
        self._store: JobStore | None = None

    def run_once(self) -> None:
        if self._store is None:
            self._store = store_for(
                private_connection(self.using, statement_seconds=QUEUE_STATEMENT_TIMEOUT, lock_seconds=2)
            )
        self.rescue_expired(self._store)
        self.expire_overdue(self._store)

    def drop_connections(self) -> None:
        if self._store is not None:
            self._store.connection.close()
            self._store = None
        super().drop_connections()

    def rescue_expired(self, store: JobStore) -> None:
        """Put back jobs whose worker died (the attempt counts); tell the hooks of those that ended dead."""
        dead = []
        rescued = store.rescue_expired()
        for job_id, status, _queue in rescued:
            log.warning("job %s lease expired; rescued to %s (the attempt counts)", job_id, status)
            if status == JobStatus.DEAD:
                dead.append(job_id)
        if rescued:
            metrics.count(metrics.LEASE_EXPIRED, len(rescued))
            metrics.count(metrics.ATTEMPT_DEAD_LETTERED, len(dead))
            metrics.count(metrics.ATTEMPT_RETRIED, len(rescued) - len(dead))
        if dead:
            for job_id, handler, payload, error in store.describe(dead):
                self._tell(DeadLetter(job_id, handler, payload, JobStatus.DEAD.value, error))

    def expire_overdue(self, store: JobStore) -> None:
        """Dead-letter waiting jobs past their deadline (the claim never starts them); tell their hooks."""
        expired = store.expire_overdue()
        if not expired:
            return
        metrics.count(metrics.JOB_EXPIRED, len(expired))
        for job_id, handler, payload, error in store.describe(expired):
            log.warning("job %s expired before it started; dead-lettered", job_id)
            self._tell(DeadLetter(job_id, handler, payload, JobStatus.DEAD.value, error))

    def _tell(self, letter: DeadLetter) -> None:
        tell_hook(letter, queue_using=self.using, handler_using=self.handler_using)
