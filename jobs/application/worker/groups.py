"""Batch handlers: the jobs of a handler that registered a batch handler (`jobs.application.registry`) go
to it together, in one call under one deadline, when a claim holds two or more of them. What it hands back,
or everything it did not complete if it raises, runs one by one as any job (`attempts`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from django.db import connections

from jobs.application import metrics
from jobs.application.payloads import Payload
from jobs.application.registry import BatchHandler, BatchItem, get_batch_handler
from jobs.application.worker.attempts import Attempts, epoch
from jobs.application.worker.deadlines import DeadlinePassed, Deadlines, timeout_message
from jobs.application.worker.failures import Failures
from jobs.application.worker.state import Executor, WorkerState
from jobs.infrastructure.store import ClaimedJob, Finished, JobStore
from kernel.failures import JobTimeout, LeaseLost, format_error

log = logging.getLogger("relay.worker")


class Groups:
    """Gives a claim's jobs of one batch handler to it together."""

    def __init__(self, state: WorkerState, attempts: Attempts, deadlines: Deadlines, failures: Failures) -> None:
        self.state = state
        self.attempts = attempts
        self.deadlines = deadlines
        self.failures = failures

    def run_together(
        self, store: JobStore, executor: Executor, batch: list[ClaimedJob], claimed_at: float, duration: float
    ) -> tuple[list[ClaimedJob], float]:
        """Give the jobs of a handler with a batch handler to it together; returns the jobs left to run
        one by one, and the moving average of a job's run time."""
        together: dict[str, list[ClaimedJob]] = {}
        batch_handlers: dict[str, BatchHandler] = {}
        for job in batch:
            batch_handler = get_batch_handler(job.handler)
            if batch_handler is not None:
                together.setdefault(job.handler, []).append(job)
                batch_handlers[job.handler] = batch_handler
        executor.grouped = any(len(jobs) > 1 for jobs in together.values())
        if self.state.stopping.is_set() or not executor.grouped:
            return batch, duration
        left = [job for job in batch if len(together.get(job.handler, ())) < 2]
        for handler, jobs in together.items():
            if len(jobs) < 2:
                continue  # already in `left`
            if self.state.stopping.is_set():
                left.extend(jobs)  # the loop after gives them back
                continue
            started = time.monotonic()
            left.extend(self.run_group(store, executor, handler, batch_handlers[handler], jobs, claimed_at))
            duration = 0.8 * duration + 0.2 * (time.monotonic() - started) / len(jobs)
        return left, duration

    def run_group(
        self,
        store: JobStore,
        executor: Executor,
        handler: str,
        batch_handler: BatchHandler,
        jobs: list[ClaimedJob],
        claimed_at: float,
    ) -> list[ClaimedJob]:
        """One call of a batch handler, under one deadline. Returns the jobs to run one by one: those it
        left, or, if it failed, every job whose completion did not commit."""
        started = time.time()
        executor.waits.extend([started - epoch(job.run_at) for job in jobs])
        handler_connection = connections[self.state.handler_using]
        contexts = [self.attempts.context(job, started) for job in jobs]
        running = self.deadlines.running_for(jobs[0], handler_connection, claimed_at)
        error: BaseException | None = None
        left: Sequence[BatchItem] = ()
        items: list[BatchItem] = [(Payload(job.payload), context) for job, context in zip(jobs, contexts, strict=True)]
        try:
            left = self.deadlines.supervised(executor, running, lambda: batch_handler(items)) or ()
        except DeadlinePassed:
            error = JobTimeout(timeout_message(self.state.config))
        except Exception as exc:
            error = exc
        self.attempts.reset_handler(force=error is not None)
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
                self.failures.record(store, job, error, started, executor=executor)
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
        with self.state.lock:
            executor.acks.extend(
                Finished(job.id, job.attempt_number, started, finished) for job, c in pending if c.id not in left_ids
            )
        return [job for job, context in pending if context.id in left_ids]
