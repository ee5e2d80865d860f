"""The queue keeps its own tables vacuumed when autovacuum does not (jobs.domain.vacuum says when).

Every worker runs one pass every CHECK_SECONDS on a connection of its own (a VACUUM of a big table can take
minutes, and must not hold up lease rescue or cron): it reads the statistics of the queue's tables and of the
outboxes it moves, and vacuums (or analyzes) those over autovacuum's trigger that autovacuum has left alone.
Two workers that decide at once do not both work: VACUUM (SKIP_LOCKED) returns at once on a table another
vacuum holds. JOB_VACUUM = False leaves it all to autovacuum or the operator's cron.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from jobs.application import metrics
from jobs.domain.vacuum import TableActivity, VacuumPolicy
from jobs.infrastructure import vacuum as pg

log = logging.getLogger("relay.jobs")

CHECK_SECONDS = 5.0  # between two reads of the statistics (a read of a few rows in shared memory)
QUEUE_TABLES = ("jobs_job", "jobs_lane")  # in the queue's database
OUTBOX_TABLES = ("jobs_outbox",)  # in each database whose outbox the workers move (JOBS_DATABASE)

_refused: set[str] = set()  # tables this process may not vacuum, said once


def keep_vacuumed(connection, tables: Sequence[str]) -> list[TableActivity]:
    """One pass over `tables` on `connection` (PostgreSQL, autocommit): vacuum or analyze those that need it.
    Returns the activity of the tables it worked on."""
    if connection.vendor != "postgresql":
        return []
    server = pg.server_settings(connection)
    policy = VacuumPolicy(grace_seconds=2 * float(server["autovacuum_naptime"]))
    done = []
    for activity in pg.table_activity(connection, tables, server):
        if not activity.may_vacuum:
            if activity.table not in _refused:
                _refused.add(activity.table)
                log.warning(
                    "cannot vacuum %s: the database user does not own it; leaving it to autovacuum", activity.table
                )
            continue
        vacuum, analyze = policy.needs_vacuum(activity), policy.needs_analyze(activity)
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
        done.append(activity)
    return done
