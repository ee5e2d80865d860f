"""Metrics flush: this process's counts reach the database, and the gauges are counted when it is this
worker's turn (jobs.application.metrics).

Every pass adds what the process counted (at most every FLUSH_SECONDS) and asks for the gauges' refresh,
which one worker per JOB_METRICS_INTERVAL takes. At its stop it adds what is left: the worker stops this
service last, after its final acknowledgements, so a worker that stops leaves nothing uncounted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobs.application import metrics
from jobs.application.maintenance.service import STOP_SECONDS, MaintenanceService
from kernel.failures import format_error

log = logging.getLogger("relay.worker")


class MetricsFlush(MaintenanceService):
    """Every pass: flush the counts when due and ask for the gauges; at the end, flush what is left."""

    name = "metrics"

    def __init__(
        self,
        *,
        using: str,
        worker_id: str,
        interval: float,
        every: float = 1.0,
        databases: Sequence[str] = (),
    ) -> None:
        super().__init__(every=every, databases=databases or (using,))
        self.using = using
        self.worker_id = worker_id
        self.interval = interval  # JOB_METRICS_INTERVAL: between two gauge counts across all workers

    def run_once(self) -> None:
        metrics.flush_if_due(self.using)
        metrics.refresh_gauges(interval=self.interval, worker_id=self.worker_id, using=self.using)

    def close(self) -> None:
        self.flush()
        super().close()

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        ended = super().stop(timeout)
        if not ended:  # a pass still runs (a slow count): flush from here, the counts must not wait for it
            self.flush()
            self.drop_connections()
        return ended

    def flush(self) -> None:
        """What this process counted reaches the database (kept for the next flush if it cannot)."""
        try:
            metrics.flush(self.using)
        except Exception as exc:
            log.warning("could not store metrics: %s", format_error(exc))
