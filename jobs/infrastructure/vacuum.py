"""PostgreSQL's view of the queue's tables (pg_stat_user_tables, storage parameters) and the VACUUM itself."""

from __future__ import annotations

from collections.abc import Sequence

from jobs.domain.vacuum import TableActivity

# The queue's churning tables, in its database: every job is inserted, updated twice and deleted by retention.
QUEUE_TABLES = ("jobs_job", "jobs_lane")
_OFF = ("false", "off", "0", "no")

_ACTIVITY = """
    SELECT s.relname, s.n_live_tup, s.n_dead_tup, s.n_mod_since_analyze,
           extract(epoch FROM clock_timestamp() - greatest(s.last_vacuum, s.last_autovacuum))::float8,
           extract(epoch FROM clock_timestamp() - greatest(s.last_analyze, s.last_autoanalyze))::float8,
           coalesce(c.reloptions, '{}'),
           pg_has_role(current_user, c.relowner, 'MEMBER')
               OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.relname = ANY(%s) AND pg_table_is_visible(s.relid)
"""

_SERVER = """
    SELECT name, setting FROM pg_settings
    WHERE name IN ('autovacuum', 'track_counts', 'autovacuum_naptime',
                   'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor',
                   'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor',
                   'autovacuum_vacuum_cost_delay', 'autovacuum_vacuum_cost_limit',
                   'vacuum_cost_delay', 'vacuum_cost_limit')
"""


def storage_parameters(reloptions: Sequence[str]) -> dict[str, str]:
    """`ALTER TABLE ... SET (...)`'s values as pg_class keeps them ('name=value' strings)."""
    return dict(option.split("=", 1) for option in reloptions)


def autovacuum_disabled(options: dict[str, str]) -> bool:
    """A table's `autovacuum_enabled = false` (in any of the spellings PostgreSQL accepts)."""
    return options.get("autovacuum_enabled", "true").lower() in _OFF


def server_settings(connection) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(_SERVER)
        return dict(cursor.fetchall())


def table_activity(connection, tables: Sequence[str], server: dict[str, str]) -> list[TableActivity]:
    """What autovacuum would look at for each of `tables` (those that exist); the statistics are the server's
    latest, a second or so behind the writes (PostgreSQL flushes each backend's counts about once a second)."""
    server_on = server.get("autovacuum") == "on" and server.get("track_counts") == "on"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # no counts cached from an earlier read
        cursor.execute(_ACTIVITY, [list(tables)])
        rows = cursor.fetchall()
    out = []
    for name, live, dead, changed, since_vacuum, since_analyze, reloptions, may_vacuum in rows:
        options = storage_parameters(reloptions)

        def setting(key: str, options: dict[str, str] = options) -> str:
            return options.get(key, server[key])

        out.append(
            TableActivity(
                table=name,
                live_rows=int(live),
                dead_rows=int(dead),
                changed_since_analyze=int(changed),
                seconds_since_vacuum=since_vacuum,
                seconds_since_analyze=since_analyze,
                vacuum_threshold=int(setting("autovacuum_vacuum_threshold")),
                vacuum_scale_factor=float(setting("autovacuum_vacuum_scale_factor")),
                analyze_threshold=int(setting("autovacuum_analyze_threshold")),
                analyze_scale_factor=float(setting("autovacuum_analyze_scale_factor")),
                autovacuum_on=server_on and not autovacuum_disabled(options),
                may_vacuum=bool(may_vacuum),
                cost_delay_ms=_own_or(float(setting("autovacuum_vacuum_cost_delay")), server["vacuum_cost_delay"]),
                cost_limit=int(_own_or(int(setting("autovacuum_vacuum_cost_limit")), server["vacuum_cost_limit"])),
            )
        )
    return out


def _own_or(value: float, fallback: str) -> float:
    """Autovacuum's cost settings: -1 means "the manual VACUUM's setting"."""
    return value if value >= 0 else float(fallback)


def vacuum(connection, activity: TableActivity, *, analyze: bool, vacuum: bool = True) -> None:
    """VACUUM (and/or ANALYZE) one table, outside any transaction, throttled as autovacuum would be (a manual
    VACUUM is not throttled at all: beside the workers it would take the CPU and the disk from the claims).
    SKIP_LOCKED: when autovacuum or another worker is already at it, this returns at once."""
    name = connection.ops.quote_name(activity.table)
    if vacuum:
        statement = f"VACUUM (SKIP_LOCKED{', ANALYZE' if analyze else ''}) {name}"
    else:
        statement = f"ANALYZE (SKIP_LOCKED) {name}"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('vacuum_cost_delay', %s, false), set_config('vacuum_cost_limit', %s, false)",
            [str(max(activity.cost_delay_ms, 0.0)), str(activity.cost_limit)],
        )
        cursor.execute(statement)
