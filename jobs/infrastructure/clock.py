"""The database's clock: the one every worker agrees on (README: the hosts' clocks need not agree)."""

from __future__ import annotations

from datetime import datetime

from django.db import connections
from django.utils import timezone

from jobs.infrastructure.database import queue_database


def database_now(using: str | None = None) -> datetime:
    """Now by PostgreSQL's clock (statement_timestamp, not a transaction's frozen now()); SQLite runs on one
    host, so there it is this host's clock."""
    using = using or queue_database()
    connection = connections[using]
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
