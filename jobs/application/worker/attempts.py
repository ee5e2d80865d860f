"""One attempt: an executor runs a claimed job's handler under its deadline, on the thread's ordinary
connection (never the queue's private one), and leaves that connection clean for the next job.

What it ends in: a completion to acknowledge (`Finished`), or nothing more to write here (the handler
completed the job in its own transaction, its failure was recorded, its lease was lost, or the main thread
recorded its timeout).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from django.db import connections

from jobs.application import metrics
from jobs.application.context import JobContext, context_for
from jobs.application.payloads import Payload
from jobs.application.registry import UnknownHandler, get_handler
from jobs.application.worker.deadlines import DeadlinePassed, Deadlines, timeout_message
from jobs.application.worker.failures import Failures
from jobs.application.worker.state import Executor, WorkerState
from jobs.infrastructure.connections import reset_handler_connections
from jobs.infrastructure.store import ClaimedJob, Finished, JobStore, store_for
from kernel.failures import JobTimeout, LeaseLost, PermanentError

log = logging.getLogger("relay.worker")


def epoch(value: object) -> float:
    """A claimed row's due time in epoch seconds (PostgreSQL gives datetimes, SQLite text)."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    return time.time()


class Attempts:
    """Runs one job's handler for an executor, and what a batch handler's call needs too."""

    def __init__(self, state: WorkerState, deadlines: Deadlines, failures: Failures) -> None:
        self.state = state
        self.deadlines = deadlines
        self.failures = failures

    def context(self, job: ClaimedJob, started: float) -> JobContext:
        """What the handler is told of its job. mark_completed writes on this thread's connection to the queue's
        database (the handler's own when the queue shares `default`), so it joins the handler's transaction."""
        return context_for(job, store_for(connections[self.state.using]), self.state.worker_id, started)

    def reset_handler(self, *, force: bool = False) -> bool:
        """Leave the handler's connections clean for the next job; True when one had a transaction left open."""
        return reset_handler_connections(self.state.handler_using, self.state.using, force=force)

    def run_job(self, store: JobStore, executor: Executor, job: ClaimedJob, claimed_at: float) -> Finished | None:
        """Run one job; returns its completion to acknowledge, or None when there is nothing more to write."""
        started = time.time()
        executor.waits.append(started - epoch(job.run_at))
        handler_connection = connections[self.state.handler_using]
        context = self.context(job, started)
        running = self.deadlines.running_for(job, handler_connection, claimed_at)
        error: BaseException | None = None
        try:
            handler = get_handler(job.handler)
            self.deadlines.supervised(executor, running, lambda: handler(Payload(job.payload), context))
        except DeadlinePassed:
            error = JobTimeout(timeout_message(self.state.config))
        except UnknownHandler as exc:
            error = PermanentError(str(exc))
        except LeaseLost as exc:
            log.warning("job %s %s: %s; its outcome is discarded", job.id, job.handler, exc)
            self.reset_handler()
            return None
        except Exception as exc:
            error = exc
        if running.runaway:  # its timeout was recorded when it did not stop: whatever it did since is not its own
            self.reset_handler(force=True)
            if context.completed_in_transaction:  # it completed first: its timeout found nothing to record
                metrics.count(metrics.ATTEMPT_SUCCEEDED)
            log.info("job %s %s returned after its timeout was recorded; nothing more is written", job.id, job.handler)
            return None
        if error is not None:
            self.reset_handler(force=True)
            self.failures.record(store, job, error, started, executor=executor)
            return None
        if self.reset_handler():
            log.error("job %s %s left a transaction open; it was rolled back", job.id, job.handler)
        if context.completed_in_transaction:
            metrics.count(metrics.ATTEMPT_SUCCEEDED)
            log.info("job %s %s completed in %.1f ms", job.id, job.handler, (time.time() - started) * 1000)
            return None
        return Finished(job.id, job.attempt_number, started, time.time())
