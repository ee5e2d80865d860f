"""The claim-run-acknowledge loop, one per executor thread:

    claim a batch (one statement)  ->  run each handler  ->  acknowledge the
    completed ones (one statement); a failure is written at once, as a retry
    with backoff, a permanent failure, or dead.

Each executor runs the queue's statements on a private connection and its handlers on the thread's
ordinary one, so nothing a handler does to its connection reaches the queue. A claim is sized to what the
executor will start soon; what it has not started within the hold limit, or when the worker stops, it gives
back. An idle executor sleeps until a committed enqueue wakes it or the poll interval passes; a lost
database makes it keep what it owes, reconnect with backoff, and write that first.
"""

from __future__ import annotations

import logging
import time

from jobs.application.config import QUEUE_LOCK_TIMEOUT, QUEUE_STATEMENT_TIMEOUT, reconnect_after
from jobs.application.maintenance.outbox import drain_outboxes
from jobs.application.worker.acknowledge import Acknowledgements
from jobs.application.worker.attempts import Attempts
from jobs.application.worker.deadlines import hold_limit
from jobs.application.worker.groups import Groups
from jobs.application.worker.state import Executor, WorkerState
from jobs.infrastructure.connections import close_thread_connections
from jobs.infrastructure.store import ClaimedJob, JobStore
from kernel.failures import format_error

log = logging.getLogger("relay.worker")

BATCH_TARGET_SECONDS = 0.05  # claim about as many jobs as one executor finishes in this time
# The same, while the claims go to a batch handler: it starts them all at once, so none waits unstarted, and
# the more it gets the fewer statements each costs (2,000 three-step runs: 0.05 s gave batches of 3-9 jobs
# and ~140 runs/s; 0.5 s ~280 runs/s, see bench/README.md). A job then waits at most this long for its batch.
GROUP_TARGET_SECONDS = 0.5
ACK_DELAY_SECONDS = 0.05  # a completed job waits at most this long (plus one job) for its acknowledgement


class QueueUnreachable(Exception):
    """What an executor kept while the database was unreachable could not be written yet: try again later."""


def batch_limit(average_duration: float, batch_size: int, target: float = BATCH_TARGET_SECONDS) -> int:
    """Claim what this executor will start soon: many fast jobs, one slow job."""
    if average_duration <= 0:
        return min(batch_size, 10)
    return max(1, min(batch_size, int(target / average_duration)))


class Loop:
    """An executor thread's life: `run(executor)` until the worker stops (or, in burst mode, runs dry)."""

    def __init__(self, state: WorkerState, attempts: Attempts, groups: Groups, acks: Acknowledgements) -> None:
        self.state = state
        self.attempts = attempts
        self.groups = groups
        self.acks = acks

    def run(self, executor: Executor) -> None:
        state = self.state
        store: JobStore | None = None
        duration = 0.0  # moving average of a job's run time, sizes the next claim
        failures = 0
        try:
            while not state.stopping.is_set():
                try:
                    if store is None:
                        store = state.private_store(
                            statement_seconds=QUEUE_STATEMENT_TIMEOUT, lock_seconds=QUEUE_LOCK_TIMEOUT
                        )
                    if executor.owes() and not self.acks.write_owed(store, executor):
                        raise QueueUnreachable("the database is still unreachable")
                    with state.lock:
                        state.busy += 1
                    try:
                        batch = store.claim(
                            state.worker_id,
                            state.queues,
                            batch_limit(
                                duration,
                                state.config.batch_size,
                                GROUP_TARGET_SECONDS if executor.grouped else BATCH_TARGET_SECONDS,
                            ),
                            state.config.lease_seconds,
                        )
                        if batch:
                            duration = self.run_batch(store, executor, batch, duration)
                    finally:
                        with state.lock:
                            state.busy -= 1
                    failures = 0
                except Exception as exc:
                    failures += 1
                    log.warning("executor %d: %s; reconnecting", executor.index, format_error(exc))
                    if store is not None:
                        store.connection.close()
                        store = None
                    # The handlers' connection went with it: start afresh.
                    close_thread_connections(state.using, state.handler_using)
                    state.stopping.wait(reconnect_after(failures))
                    continue
                if not batch:
                    with state.lock:
                        others_busy = state.busy > 0
                    if state.burst and not others_busy and not drain_outboxes(state.outboxes, state.using):
                        return  # nothing due, nothing running, nothing committed in an outbox
                    state.wake.wait(0.05 if state.burst else state.config.poll_interval)
        finally:
            if store is not None:
                try:
                    self.acks.flush(store, executor)  # what it cannot write, the shutdown tries again
                finally:
                    store.connection.close()
            close_thread_connections(state.using, state.handler_using)

    def run_batch(self, store: JobStore, executor: Executor, batch: list[ClaimedJob], duration: float) -> float:
        """Run a claimed batch (a batch handler's jobs together first); returns the moving average of a job's
        run time."""
        state = self.state
        claimed_at = time.monotonic()
        left, duration = self.groups.run_together(store, executor, batch, claimed_at, duration)
        if left is not batch:
            # What a batch handler handed back was not waiting unstarted while it ran: its hold starts now,
            # or a batch that gave everything back (one failing action) would release all but one job.
            claimed_at = time.monotonic()
        batch = left
        for position, job in enumerate(batch):
            if executor.connection_lost:
                # The database went away: start nothing more. Give the rest back once it is reachable again.
                executor.unstarted.extend(j.id for j in batch[position:])
                break
            if state.stopping.is_set() or (position and time.monotonic() - claimed_at > hold_limit(state.config)):
                # Give back what this executor did not start: to other workers, or to the next start.
                self.acks.flush(store, executor)
                self.acks.give_back(store, executor, [j.id for j in batch[position:]])
                break
            if executor.acks and time.time() - executor.acks[0].finished > ACK_DELAY_SECONDS:
                self.acks.flush(store, executor)
            finished = self.attempts.run_job(store, executor, job, claimed_at)
            if finished is not None:
                with state.lock:
                    executor.acks.append(finished)
                duration = 0.8 * duration + 0.2 * (finished.finished - finished.started)
        self.acks.flush(store, executor)
        return duration
