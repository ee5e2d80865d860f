"""Cron firing (Oban's cron plugin, River's periodic job enqueuer): every due schedule's tick enqueued once.

`jobs.application.schedules.fire_due_schedules` does the work: due on the database's clock, and the
compare-and-set on `next_run_at` in the enqueue's transaction lets one worker win each tick however many look.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobs.application.maintenance.service import MaintenanceService
from jobs.application.schedules import fire_due_schedules


class CronFiring(MaintenanceService):
    """Every pass: fire the schedules that are due (one query when none is), on this thread's connection."""

    name = "cron"

    def __init__(self, *, using: str, every: float = 1.0, databases: Sequence[str] = ()) -> None:
        super().__init__(every=every, databases=databases or (using,))
        self.using = using

    def run_once(self) -> None:
        fire_due_schedules(using=self.using)
