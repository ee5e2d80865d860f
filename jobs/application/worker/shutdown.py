"""Shutdown: SIGTERM/SIGINT (or a restart) stops the claims; running handlers get the grace period to
finish, their deadlines still enforced; what still runs past it is interrupted. Then the services stop, what
finished is acknowledged, what did not is put back to pending uncounted, and the process ends (or is
replaced by a fresh one, after a runaway handler).
"""

from __future__ import annotations

import logging
import os
import sys
import time

from django.db import Error as DatabaseError

from jobs.application.maintenance.service import stop_all
from jobs.application.worker.acknowledge import Acknowledgements
from jobs.application.worker.deadlines import Deadlines, Interrupt, raise_in_thread
from jobs.application.worker.failures import Failures
from jobs.application.worker.setup import Services
from jobs.application.worker.state import WorkerState
from jobs.infrastructure.connections import cancel_statement
from kernel.failures import format_error

log = logging.getLogger("relay.worker")


class Shutdown:
    """Ends the worker once its main loop has stopped."""

    def __init__(self, state: WorkerState, deadlines: Deadlines, acks: Acknowledgements, failures: Failures) -> None:
        self.state = state
        self.deadlines = deadlines
        self.acks = acks
        self.failures = failures

    def run(self, services: Services) -> int:
        state, executors = self.state, self.state.executors
        state.stopping.set()
        state.wake.wake_all()
        for service in services.maintenance:
            service.request_stop()  # no new pass; waited for once the executors have finished
        grace = state.restart_grace if state.restart and state.restart_grace is not None else None
        grace = state.config.shutdown_grace if grace is None else grace
        tick = min(0.1, state.config.poll_interval)
        paused_before = self.deadlines.paused
        deadline = time.monotonic() + grace
        while True:  # deadlines still hold while the others finish; a runaway handler is not waited for
            self.deadlines.tick(tick)
            left = deadline + (self.deadlines.paused - paused_before) - time.monotonic()
            waiting = [e for e in executors if e.is_alive() and not (e.running and e.running.runaway)]
            if not waiting or left <= 0:
                break
            waiting[0].join(min(tick, left))
        stuck = [e for e in executors if e.is_alive()]
        if stuck:  # past the grace: interrupt what still runs, give it a moment to unwind
            with state.lock:
                for e in stuck:
                    if e.running and not e.running.returned:
                        raise_in_thread(e.running.thread_id, Interrupt)
                        cancel_statement(e.running.handler_connection)
            for e in stuck:
                e.join(1.0)
        for listener in services.listeners:
            listener.stop()
        stop_all(services.maintenance)  # their passes in flight end before this process lets go of the queue
        self.finish_leftovers(still_running=any(e.is_alive() for e in executors))
        if services.metrics is not None:
            services.metrics.stop()  # last: what the leftovers' acknowledgements counted is flushed too
        log.info("worker %s stopped", state.worker_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        if state.restart:
            os.execv(sys.executable, sys.orig_argv)  # noqa: S606 - replace this process with a fresh one
        if any(e.is_alive() for e in executors):
            os._exit(0)  # a handler still runs in a thread: leave now, before it can do anything more
        return 0

    def finish_leftovers(self, *, still_running: bool) -> None:
        """Acknowledge what finished, then put back what did not, uncounted. A handler that may still be
        running gets its job back a little later, so no other worker starts it before this process is gone."""
        state = self.state
        with state.lock:
            acks = [a for e in state.executors for a in e.acks]
            failures = [f for e in state.executors for f in e.failures]
            for e in state.executors:
                e.acks.clear()
                e.failures.clear()
        try:
            store = state.private_store(statement_seconds=10, lock_seconds=5)
            for failure in failures:
                self.failures.write(store, failure)
            if acks and not self.acks.acknowledge(store, acks):
                log.error("%d completed jobs were not acknowledged: they run again after their lease", len(acks))
            released = store.release(state.worker_id, delay=2.0 if still_running else 0.0)
            store.connection.close()
        except DatabaseError as exc:  # the leases will pass and the jobs be rescued
            log.error("could not release running jobs: %s", format_error(exc))
            return
        for job_id in released:
            log.info("job %s released to pending (shutdown; the attempt does not count)", job_id)
