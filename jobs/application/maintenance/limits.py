"""Limits repair: every account's `max_concurrent_jobs` copied to the queue's own table (jobs.application.limits).

The claim reads the queue's copy, which the accounts app keeps in step as limits change; a crash between the
two databases' commits, or a bulk write that sent no signal, is healed here. The first pass runs as the worker
starts, before its first claim (`first_pass`), then one every REPAIR_SECONDS. The usual pass reads each table
once and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobs.application import limits
from jobs.application.maintenance.service import MaintenanceService


class LimitsRepair(MaintenanceService):
    """Every REPAIR_SECONDS (the first at once): repair the limits; its connections are closed between passes."""

    name = "limits-repair"

    def __init__(self, *, databases: Sequence[str], every: float = limits.REPAIR_SECONDS) -> None:
        super().__init__(every=every, databases=databases)

    def run_once(self) -> None:
        try:
            limits.repair_limits()
        finally:
            self.drop_connections()  # a pass every five minutes need not keep a connection in between
