"""Acknowledgement: an executor's completed jobs are written together (one statement), at most
ACK_DELAY_SECONDS after the first of them; what it owes the database while it cannot reach it (completions,
failed attempts, claimed jobs it did not start) is kept and written once the database is back.
"""

from __future__ import annotations

import logging
from uuid import UUID

from django.db import Error as DatabaseError

from jobs.application import metrics
from jobs.application.worker.failures import Failures
from jobs.application.worker.state import Executor, WorkerState
from jobs.infrastructure.store import Finished, JobStore
from kernel.failures import format_error

log = logging.getLogger("relay.worker")


class Acknowledgements:
    """Writes what an executor finished, gives back what it did not start, and pays its debts."""

    def __init__(self, state: WorkerState, failures: Failures) -> None:
        self.state = state
        self.failures = failures

    def flush(self, store: JobStore, executor: Executor) -> None:
        """Acknowledge the executor's completed jobs; what cannot be written now is kept for later."""
        if executor.waits:  # counted once per batch, not per job (in this process: no database needed)
            waits, executor.waits = executor.waits, []
            metrics.observe_pickup(waits)
        if executor.connection_lost:
            return
        with self.state.lock:
            done, executor.acks = executor.acks, []
        if not self.acknowledge(store, done):
            with self.state.lock:
                executor.acks[:0] = done
            executor.connection_lost = True

    def acknowledge(self, store: JobStore, done: list[Finished]) -> bool:
        """Write completions; False (and the connection closed) when the database could not be reached."""
        if not done:
            return True
        try:
            acked = store.complete(self.state.worker_id, done)
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

    def give_back(self, store: JobStore, executor: Executor, job_ids: list[UUID]) -> None:
        """Release claimed jobs this executor did not start (uncounted); kept for later if it cannot now."""
        if executor.connection_lost:
            executor.unstarted.extend(job_ids)
            return
        try:
            store.release(self.state.worker_id, job_ids)
        except DatabaseError as exc:
            log.warning("could not give back %d unstarted jobs yet: %s; kept", len(job_ids), format_error(exc))
            store.connection.close()
            executor.unstarted.extend(job_ids)
            executor.connection_lost = True

    def write_owed(self, store: JobStore, executor: Executor) -> bool:
        """Write what the executor kept while the database was unreachable; False if it still is."""
        executor.connection_lost = False
        owed = (len(executor.failures), len(executor.acks), len(executor.unstarted))
        failures, executor.failures = executor.failures, []
        for position, failure in enumerate(failures):
            if self.failures.write(store, failure, executor) is None:
                executor.failures.extend(failures[position + 1 :])
                return False
        self.flush(store, executor)
        if executor.connection_lost:
            return False
        unstarted, executor.unstarted = executor.unstarted, []
        self.give_back(store, executor, unstarted)
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
