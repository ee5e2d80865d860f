"""Failure recording: a failed attempt is classified once, the retry policy decides what it leads to (a
retry after its backoff, failed, dead), and the decision is written at once, under the compare-and-set on
the lease. An executor that cannot reach the database keeps it (`Executor.failures`) until it can; a job
that gave up for good is told to its dead-letter hook.

A snooze (the handler raised `JobSnooze`, or called `job.snooze`) takes the same road without being a failure:
nothing is classified, the job is put back until its time, uncounted (`JobStore.snooze`), kept like a failure
while the database is unreachable, and counted in `relay_jobs_snoozes_total`.
"""

from __future__ import annotations

import logging
import traceback

from django.db import Error as DatabaseError

from jobs.application import metrics
from jobs.application.dead_letters import tell_hook
from jobs.application.registry import DeadLetter
from jobs.application.worker.state import Executor, Failure, Snooze, WorkerState
from jobs.domain.snooze import JobSnooze
from jobs.infrastructure.store import ClaimedJob, JobStore
from kernel.failures import classify, format_error

log = logging.getLogger("relay.worker")


class Failures:
    """Decides and writes failed attempts, for the executors, the deadlines (a runaway) and the shutdown."""

    def __init__(self, state: WorkerState) -> None:
        self.state = state

    def record(
        self,
        store: JobStore,
        job: ClaimedJob,
        exc: BaseException,
        started: float,
        not_before: float = 0.0,
        executor: Executor | None = None,
    ) -> None:
        """Decide what the failed attempt leads to and write it; an executor keeps it if it cannot be written.
        A snooze is not decided: the handler said when."""
        failure: Failure | Snooze
        if isinstance(exc, JobSnooze):
            failure = Snooze(job, exc.seconds, exc.reason, started)
        else:
            failure = self.decide(job, exc, started, not_before)
        if executor is not None and executor.connection_lost:
            executor.failures.append(failure)
            return
        self.write(store, failure, executor)

    def decide(self, job: ClaimedJob, exc: BaseException, started: float, not_before: float = 0.0) -> Failure:
        """The failed attempt, classified once, and what it leads to: a retry (after its delay), failed, dead."""
        error = classify(exc)
        decision = self.state.config.retry.decide(
            attempt_number=job.attempt_number, error=error, max_attempts=job.max_attempts
        )
        delay = decision.delay if decision.delay is None else max(decision.delay, not_before)
        if log.isEnabledFor(logging.DEBUG):  # frames only: exception messages may carry secrets
            log.debug("job %s raised %s at\n%s", job.id, error.message, "".join(traceback.format_tb(exc.__traceback__)))
        return Failure(job, error, decision, delay, started)

    def write(self, store: JobStore, failure: Failure | Snooze, executor: Executor | None = None) -> bool | None:
        """Write a decided failure: True when written, False when this worker no longer holds the job, None
        when the database could not be reached (an executor keeps it, to write it once the database is back)."""
        if isinstance(failure, Snooze):
            return self.write_snooze(store, failure, executor)
        job, error, decision, delay = failure.job, failure.error, failure.decision, failure.delay
        try:
            written = store.fail(
                self.state.worker_id,
                job.id,
                job.attempt_number,
                status=decision.status.value,
                error=error.message,
                delay=delay,
                started=failure.started,
            )
        except DatabaseError as exc2:
            store.connection.close()
            if executor is None:
                log.error("could not record failure of job %s: %s", job.id, format_error(exc2))
                return None
            log.warning("could not record the failure of job %s yet: %s; kept", job.id, format_error(exc2))
            executor.failures.append(failure)
            executor.connection_lost = True
            return None
        if written:
            metrics.count(metrics.ATTEMPT_RETRIED if decision.will_retry else metrics.ATTEMPT_DEAD_LETTERED)
        if not written:
            log.warning("job %s failure not recorded: this worker no longer holds its lease", job.id)
            return False
        elif decision.will_retry:
            log.warning(
                "job %s %s attempt %d/%d failed (%s), retrying in %.1f s: %s",
                job.id,
                job.handler,
                job.attempt_number,
                job.max_attempts,
                error.category,
                delay,
                error.message,
            )
        else:
            log.error(
                "job %s %s %s after attempt %d/%d (%s): %s",
                job.id,
                job.handler,
                decision.status,
                job.attempt_number,
                job.max_attempts,
                error.category,
                error.message,
            )
            self.dead_letter(DeadLetter(job.id, job.handler, job.payload, decision.status.value, error.message))
        return True

    def write_snooze(self, store: JobStore, snooze: Snooze, executor: Executor | None = None) -> bool | None:
        """Put the snoozed job back until its time, its attempt uncounted; True, False and None as `write`."""
        job = snooze.job
        try:
            written = store.snooze(
                self.state.worker_id, job.id, job.attempt_number, delay=snooze.seconds, started=snooze.started
            )
        except DatabaseError as exc:
            store.connection.close()
            if executor is None:
                log.error("could not record the snooze of job %s: %s", job.id, format_error(exc))
                return None
            log.warning("could not record the snooze of job %s yet: %s; kept", job.id, format_error(exc))
            executor.failures.append(snooze)
            executor.connection_lost = True
            return None
        if not written:
            log.warning("job %s snooze not recorded: this worker no longer holds its lease", job.id)
            return False
        metrics.count(metrics.snoozed(job.handler))
        log.info(
            "job %s %s snoozed for %.1f s (attempt %d not counted)%s",
            job.id,
            job.handler,
            snooze.seconds,
            job.attempt_number,
            f": {snooze.reason}" if snooze.reason else "",
        )
        return True

    def dead_letter(self, letter: DeadLetter) -> None:
        tell_hook(letter, queue_using=self.state.using, handler_using=self.state.handler_using)
