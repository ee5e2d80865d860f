"""When the queue vacuums its own tables: autovacuum's rule, applied by the workers when autovacuum does not.

A queue's tables churn (every job is inserted, updated twice, then deleted by retention). Until a VACUUM,
each completed job leaves dead entries at the front of the claim index's range for its lane and in the
running index, and every claim reads past them: on a server with autovacuum off, a claim's cost grows with
every job run since the last VACUUM. The workers therefore step in, with PostgreSQL's own trigger (dead rows
over `threshold + scale_factor x live rows`, the table's storage parameters first), when autovacuum is off
for the table, or has left it over its trigger for longer than `grace_seconds` (two naptimes: it visits each
database once per naptime). With a healthy autovacuum the workers never vacuum.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableActivity:
    """One table's counts since its last vacuum and analyze, and the settings autovacuum applies to it."""

    table: str
    live_rows: int
    dead_rows: int
    changed_since_analyze: int
    seconds_since_vacuum: float | None  # the last VACUUM, manual or automatic; None: never
    seconds_since_analyze: float | None
    vacuum_threshold: int
    vacuum_scale_factor: float
    analyze_threshold: int
    analyze_scale_factor: float
    autovacuum_on: bool  # the server's autovacuum and track_counts, and the table's autovacuum_enabled
    may_vacuum: bool = True  # this role owns the table (VACUUM skips a table it does not own)
    cost_delay_ms: float = 2.0  # autovacuum's throttle for this table, which the workers' VACUUM applies too
    cost_limit: int = 200

    @property
    def vacuum_trigger(self) -> float:
        return self.vacuum_threshold + self.vacuum_scale_factor * max(self.live_rows, 0)

    @property
    def analyze_trigger(self) -> float:
        return self.analyze_threshold + self.analyze_scale_factor * max(self.live_rows, 0)


@dataclass(frozen=True)
class VacuumPolicy:
    grace_seconds: float  # how long a running autovacuum is given before the workers do its work

    def needs_vacuum(self, activity: TableActivity) -> bool:
        return (
            activity.may_vacuum
            and activity.dead_rows > activity.vacuum_trigger
            and self._autovacuum_is_late(activity, activity.seconds_since_vacuum)
        )

    def needs_analyze(self, activity: TableActivity) -> bool:
        """Fresh statistics keep the claim's plans (made once per worker connection) fitted to the table."""
        return (
            activity.may_vacuum
            and activity.changed_since_analyze > activity.analyze_trigger
            and self._autovacuum_is_late(activity, activity.seconds_since_analyze)
        )

    def retry_after(self, ineffective: int, first: float) -> float:
        """A VACUUM that left its table over the trigger was held back by an open transaction (its snapshot
        still sees the dead rows): another one now would scan the same pages for nothing. Wait `first`,
        doubling each time it happens again, at most `grace_seconds`."""
        return min(self.grace_seconds, first * 2 ** max(ineffective - 1, 0))

    def _autovacuum_is_late(self, activity: TableActivity, seconds_since: float | None) -> bool:
        if not activity.autovacuum_on or seconds_since is None:
            return True
        return seconds_since >= self.grace_seconds
