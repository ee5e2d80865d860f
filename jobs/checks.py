"""System checks of the queue's settings: `manage.py check`, and every command that starts (runworker, the
web server), refuse a value the queue would misread."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

from jobs.infrastructure.database import queue_database
from jobs.infrastructure.vacuum import QUEUE_TABLES, autovacuum_disabled, storage_parameters

MAX_DEAD_LETTER_RETENTION_DAYS = 3650


@register("jobs")
def check_queue_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    problems: list[Error] = []
    days = settings.JOB_DEAD_LETTER_RETENTION_DAYS
    if days is not None and days > MAX_DEAD_LETTER_RETENTION_DAYS:
        problems.append(
            Error(
                f"JOB_DEAD_LETTER_RETENTION_DAYS is {days:g}; the most allowed is {MAX_DEAD_LETTER_RETENTION_DAYS}"
                " (ten years). Unset it, or set 0, to keep dead letters forever.",
                id="jobs.E001",
            )
        )
    alias = queue_database()
    if alias not in settings.DATABASES:
        problems.append(
            Error(
                f"JOBS_DATABASE is {alias!r}, which is not a database in DATABASES"
                f" ({', '.join(sorted(settings.DATABASES))}); set JOBS_DATABASE_URL or remove JOBS_DATABASE.",
                id="jobs.E004",
            )
        )
    elif alias != "default" and not all(db["ENGINE"].endswith("postgresql") for db in settings.DATABASES.values()):
        problems.append(
            Error(
                f"JOBS_DATABASE is {alias!r}: the queue in a database of its own needs PostgreSQL for it and for"
                " every other database (the outbox and its move use LISTEN/NOTIFY and SKIP LOCKED).",
                id="jobs.E005",
            )
        )
    if float(settings.JOB_METRICS_INTERVAL) < 0:
        problems.append(Error("JOB_METRICS_INTERVAL must be 0 (off) or a number of seconds.", id="jobs.E002"))
    from jobs.api.metrics import allowed_networks

    try:
        allowed_networks()
    except ValueError as exc:
        problems.append(Error(f"METRICS_ALLOWED_IPS: {exc}", id="jobs.E003"))
    return problems


# The queue's tables churn: every job is inserted, updated twice and deleted by retention. Without VACUUM
# their dead rows and index entries pile up and every claim reads more of them (issue 14 item 9: 160,000
# dead rows in six minutes at 250 jobs/s, pickup latency rising). Migration 0010 sets the storage parameters
# below; these are the most a queue can live with. Where autovacuum is off anyway, the workers vacuum the
# queue's tables themselves (jobs.application.vacuum, JOB_VACUUM).
MAX_VACUUM_SCALE_FACTOR = 0.05


def autovacuum_problems(using: str | None = None) -> list[Warning]:
    """What is unsafe in the queue database's autovacuum settings (PostgreSQL; none elsewhere or unreachable)."""
    using = using or queue_database()
    from django.db import DatabaseError, connections

    connection = connections[using]
    if connection.vendor != "postgresql":
        return []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('autovacuum'), current_setting('track_counts')")
            autovacuum, track_counts = cursor.fetchone()
            cursor.execute(
                "SELECT c.relname, coalesce(c.reloptions, '{}') FROM pg_class c"
                " WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND pg_table_is_visible(c.oid)",
                [list(QUEUE_TABLES)],
            )
            options = {name: storage_parameters(opts) for name, opts in cursor.fetchall()}
            cursor.execute("SELECT current_setting('autovacuum_vacuum_scale_factor')::float8")
            (default_scale,) = cursor.fetchone()
    except DatabaseError:
        return []  # no database yet (a first `migrate`): nothing to say
    problems: list[Warning] = []
    if autovacuum != "on" or track_counts != "on":
        problems.append(
            Warning(
                f"PostgreSQL runs with autovacuum = {autovacuum}, track_counts = {track_counts}: "
                + (
                    "the workers vacuum the queue's own tables (JOB_VACUUM), but nothing vacuums the others."
                    if settings.JOB_VACUUM and track_counts == "on"
                    else "nothing vacuums the queue's tables (jobs_job, jobs_lane): dead rows pile up and claims"
                    " slow down."
                ),
                hint='Set autovacuum = on and track_counts = on in postgresql.conf (README, "Autovacuum"), or'
                " run VACUUM (ANALYZE) from cron every few minutes.",
                id="jobs.W001",
            )
        )
    for table in QUEUE_TABLES:
        opts = options.get(table)
        if opts is None:
            continue  # not migrated yet
        if autovacuum_disabled(opts):
            problems.append(
                Warning(
                    f"{table} has autovacuum_enabled = false: it is never vacuumed.",
                    hint=f"ALTER TABLE {table} RESET (autovacuum_enabled)",
                    id="jobs.W002",
                )
            )
        scale = float(opts.get("autovacuum_vacuum_scale_factor", default_scale))
        if scale > MAX_VACUUM_SCALE_FACTOR:
            problems.append(
                Warning(
                    f"{table}'s autovacuum_vacuum_scale_factor is {scale:g}: a table of 10 million jobs would"
                    f" gather {scale * 10_000_000:,.0f} dead rows before a vacuum.",
                    hint=f"ALTER TABLE {table} SET (autovacuum_vacuum_scale_factor = 0.01), as migration 0010 did.",
                    id="jobs.W003",
                )
            )
    return problems


@register("jobs", deploy=True)
def check_autovacuum(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    """`manage.py check --deploy` (and runworker at start-up) warn when the queue would depend on manual VACUUM."""
    return autovacuum_problems()
