"""The queue keeps its own tables vacuumed when autovacuum does not (jobs.domain.vacuum says when).

Every worker runs one pass every CHECK_SECONDS on a connection of its own (a VACUUM of a big table can take
minutes, and must not hold up lease rescue or cron): it reads the statistics of the queue's tables and of the
outboxes it moves, and vacuums (or analyzes) those over autovacuum's trigger that autovacuum has left alone.
Two workers that decide at once do not both work: VACUUM (SKIP_LOCKED) returns at once on a table another
vacuum holds. Other apps add their own churning tables (`register_tables`: the workflow engine's runs and
waits). JOB_VACUUM = False leaves it all to autovacuum or the operator's cron.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from jobs.application import metrics
from jobs.domain.vacuum import TableActivity, VacuumPolicy
from jobs.infrastructure import vacuum as pg
from jobs.infrastructure.vacuum import QUEUE_TABLES

log = logging.getLogger("relay.jobs")

CHECK_SECONDS = 5.0  # between two reads of the statistics (a read of a few rows in shared memory)
OUTBOX_TABLES = ("jobs_outbox",)  # in each database whose outbox the workers move (JOBS_DATABASE)


_registered: dict[str, tuple[str, ...]] = {}  # database alias -> other apps' churning tables


def register_tables(alias: str, tables: Sequence[str]) -> None:
    """Tables of other apps that churn with the queue's work (the engine's runs and waits: updated at every
    step, inserted and deleted per wait), vacuumed by the workers the same way. From an AppConfig.ready()."""
    _registered[alias] = tuple(dict.fromkeys(_registered.get(alias, ()) + tuple(tables)))


def tables_to_keep(queue_alias: str, outbox_aliases: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    """(database alias, tables) a worker keeps vacuumed: the queue's, the outboxes it moves, the registered
    ones; PostgreSQL databases only."""
    from django.db import connections

    targets: dict[str, tuple[str, ...]] = {queue_alias: QUEUE_TABLES}
    for alias in outbox_aliases:
        targets[alias] = targets.get(alias, ()) + OUTBOX_TABLES
    for alias, tables in _registered.items():
        if alias in connections.settings:
            targets[alias] = targets.get(alias, ()) + tables
    return [(alias, tables) for alias, tables in targets.items() if connections[alias].vendor == "postgresql"]


class QueueVacuum:
    """One worker's passes. It remembers which tables its VACUUM could not clean (an open transaction holds
    their dead rows back) and leaves them alone for a while (VacuumPolicy.retry_after), and which tables it
    may not vacuum at all (said once)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[float, int]] = {}  # table -> (monotonic time to try again, times in a row)
        self._refused: set[str] = set()

    def keep_vacuumed(self, connection, tables: Sequence[str]) -> list[TableActivity]:
        """One pass over `tables` on `connection` (PostgreSQL, autocommit): vacuum or analyze those that need
        it. Returns the activity of the tables it worked on."""
        if connection.vendor != "postgresql":
            return []
        server = pg.server_settings(connection)
        policy = VacuumPolicy(grace_seconds=2 * float(server["autovacuum_naptime"]))
        done = []
        for activity in pg.table_activity(connection, tables, server):
            if not activity.may_vacuum:
                if activity.table not in self._refused:
                    self._refused.add(activity.table)
                    log.warning(
                        "cannot vacuum %s: the database user does not own it; leaving it to autovacuum",
                        activity.table,
                    )
                continue
            held_until, held_times = self._held.get(activity.table, (0.0, 0))
            vacuum = policy.needs_vacuum(activity) and time.monotonic() >= held_until
            analyze = policy.needs_analyze(activity)
            if not (vacuum or analyze):
                continue
            started = time.monotonic()
            pg.vacuum(connection, activity, vacuum=vacuum, analyze=analyze)
            kind = "vacuum" if vacuum else "analyze"
            metrics.count((metrics.VACUUMS, metrics.labels_key(table=activity.table, kind=kind)))
            log.info(
                "%s %s: %d dead rows, %d changed since the last analyze, autovacuum %s (%.2f s)",
                "vacuumed" if vacuum else "analyzed",
                activity.table,
                activity.dead_rows,
                activity.changed_since_analyze,
                "on but late" if activity.autovacuum_on else "off",
                time.monotonic() - started,
            )
            if vacuum:
                self._note_result(connection, activity.table, server, policy, held_times)
            done.append(activity)
        return done

    def _note_result(self, connection, table: str, server: dict[str, str], policy: VacuumPolicy, times: int) -> None:
        after = pg.table_activity(connection, [table], server)
        if after and after[0].dead_rows > after[0].vacuum_trigger:
            times += 1
            wait = policy.retry_after(times, first=CHECK_SECONDS)
            self._held[table] = (time.monotonic() + wait, times)
            log.warning(
                "VACUUM of %s left %d dead rows: an open transaction still sees them (look in pg_stat_activity"
                " for an old xact_start: idle in transaction, a long report); next try in %.0f s",
                table,
                after[0].dead_rows,
                wait,
            )
        else:
            self._held.pop(table, None)
