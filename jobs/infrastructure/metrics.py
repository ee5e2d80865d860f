"""The statements behind the Prometheus metrics: add counted numbers, publish gauges, take a refresh.

Counters are added with one upsert per flush (rows in a fixed order, so two workers flushing at once never
deadlock); a gauge family is replaced whole in one transaction, so a label that vanished (an account with
nothing running) goes away with it. The refresh is a compare-and-set on one row, timed by the database's
clock on PostgreSQL, so workers on hosts whose clocks disagree still take one refresh per interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from django.db import connections, transaction

from jobs.infrastructure.clock import now_of
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import MetricCounter, MetricGauge, MetricRefresh

Series = tuple[str, str]  # (metric name, canonical labels)


def add_counts(counts: dict[Series, float], using: str | None = None) -> None:
    """Add these increments to the stored counters."""
    using = using or queue_database()
    if not counts:
        return
    rows = sorted(counts.items())
    connection = connections[using]
    table = MetricCounter._meta.db_table
    with transaction.atomic(using=using), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} (name, labels, value)"  # noqa: S608 - the table name is ours
                " SELECT * FROM unnest(%s::text[], %s::text[], %s::float8[])"
                f" ON CONFLICT (name, labels) DO UPDATE SET value = {table}.value + EXCLUDED.value",
                [[n for (n, _l), _v in rows], [lbl for (_n, lbl), _v in rows], [float(v) for _s, v in rows]],
            )
        else:
            cursor.executemany(
                f"INSERT INTO {table} (name, labels, value) VALUES (%s, %s, %s)"  # noqa: S608
                f" ON CONFLICT (name, labels) DO UPDATE SET value = {table}.value + excluded.value",
                [(n, lbl, float(v)) for (n, lbl), v in rows],
            )


def counters(using: str | None = None) -> list[tuple[str, str, float]]:
    using = using or queue_database()
    return list(MetricCounter.objects.using(using).order_by("name", "labels").values_list("name", "labels", "value"))


def publish_gauge(
    name: str, values: Iterable[tuple[str, float]], using: str | None = None, *, at: datetime | None = None
) -> None:
    """Replace the gauge `name`'s series with `values` ((labels, value) pairs), counted `at` (the database's
    now of the counting pass; read here if not given)."""
    using = using or queue_database()
    now = at or now_of(connections[using])
    with transaction.atomic(using=using):
        MetricGauge.objects.using(using).filter(name=name).delete()
        MetricGauge.objects.using(using).bulk_create(
            [MetricGauge(name=name, labels=labels, value=value, computed_at=now) for labels, value in values]
        )


def gauges(using: str | None = None, names: Sequence[str] | None = None) -> list[tuple[str, str, float, datetime]]:
    using = using or queue_database()
    query = MetricGauge.objects.using(using).order_by("name", "labels")
    if names is not None:
        query = query.filter(name__in=list(names))
    return list(query.values_list("name", "labels", "value", "computed_at"))


def take_refresh(interval: float, worker_id: str, using: str | None = None) -> bool:
    """True if this worker takes the refresh due now; it is then next due `interval` seconds later."""
    using = using or queue_database()
    connection = connections[using]
    table = MetricRefresh._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            take = (
                f"UPDATE {table} SET next_at = statement_timestamp() + make_interval(secs => %s),"  # noqa: S608
                " last_at = statement_timestamp(), last_worker = %s"
                " WHERE id = 1 AND next_at <= statement_timestamp()"
            )
            cursor.execute(take, [float(interval), worker_id[:120]])
            if cursor.rowcount == 1:
                return True
            # A fresh database has no row yet: create it due now, then take it (or lose it to another worker).
            cursor.execute(
                f"INSERT INTO {table} (id, next_at, last_worker) VALUES (1, statement_timestamp(), '')"  # noqa: S608
                " ON CONFLICT (id) DO NOTHING"
            )
            if cursor.rowcount != 1:
                return False
            cursor.execute(take, [float(interval), worker_id[:120]])
            return cursor.rowcount == 1
    now = now_of(connection)  # SQLite: one host, its clock is the database's (the same seam)
    MetricRefresh.objects.using(using).get_or_create(id=1, defaults={"next_at": now})
    return bool(
        MetricRefresh.objects.using(using)
        .filter(id=1, next_at__lte=now)
        .update(next_at=now + timedelta(seconds=interval), last_at=now, last_worker=worker_id[:120])
    )


def last_refresh(using: str | None = None) -> datetime | None:
    using = using or queue_database()
    return MetricRefresh.objects.using(using).filter(id=1).values_list("last_at", flat=True).first()
