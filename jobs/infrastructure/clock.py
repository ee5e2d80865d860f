"""The database's clock: the one every worker agrees on (README: the hosts' clocks need not agree).

Every due time and timestamp the queue and the engine store comes from the database that holds it: either
SQL's `statement_timestamp()` / `clock_timestamp()` in the statement itself (the queue's hot path), or one
read of the database's now per unit of work (`now_of`, `database_now`), passed to the pure domain as a value.
A host's clock is only ever used for differences (`host_time`: how long ago, by this host, an attempt began
and ended), so its offset from the database never reaches a row. On SQLite there is one host: its clock is
the database's, read through the same seam (`host_now`).
"""

from __future__ import annotations

import time
import weakref
from datetime import datetime, timedelta

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from jobs.infrastructure.database import queue_database


def host_now() -> datetime:
    """This host's clock as a datetime: the database's clock on SQLite (one host), nothing stored elsewhere."""
    return timezone.now()


def host_time() -> float:
    """This host's clock in epoch seconds: what a worker stamps an attempt's start and end with. Only the
    differences between its readings reach the database (see `ages`)."""
    return time.time()


def now_of(connection) -> datetime:
    """Now by the clock of the database behind `connection`: PostgreSQL's statement_timestamp() (not a
    transaction's frozen now()), one round trip; on SQLite, this host's clock."""
    if connection.vendor != "postgresql":
        return host_now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


def database_now(using: str | None = None) -> datetime:
    """Now by the clock of the database `using` (default: the queue's)."""
    return now_of(connections[using or queue_database()])


def ages(*moments: float, at: float | None = None) -> list[float]:
    """How many seconds before `at` (default: now, by this host's clock) each host-clock moment was: what a
    statement subtracts from the database's now to store those moments on the database's clock. Never
    negative, and the differences between them kept: a host clock stepped back shifts them all to end at
    `at` rather than into the database's future."""
    at = host_time() if at is None else at
    found = [at - moment for moment in moments]
    shift = max(0.0, -min(found, default=0.0))
    return [age + shift for age in found]


# The database's now, remembered for the transaction that read it: one read per unit of work.
_REMEMBERED = "_relay_transaction_now"


def _outermost(connection) -> object | None:
    """The outermost atomic block the code opened on the connection, if one is open (a test case's own
    wrapping transaction is not the code's unit of work)."""
    if not connection.in_atomic_block:
        return None
    return next((b for b in connection.atomic_blocks if not getattr(b, "_from_testcase", False)), None)


def remember(connection, now: datetime) -> None:
    """`now` (just read from the database) stands for the rest of the connection's open transaction, if any:
    what `transaction_now` counts from there, without reading again."""
    block = _outermost(connection)
    if block is not None:
        setattr(connection, _REMEMBERED, (weakref.ref(block), now, time.monotonic()))


def transaction_now(using: str = DEFAULT_DB_ALIAS) -> datetime:
    """The database's now for the caller's unit of work, one read per transaction: the now its transaction
    read (or remembered from a read it made anyway, a run's row) plus how long this host has counted since
    (a difference, on the monotonic clock), so two events of one transaction keep their order. Outside a
    transaction, read each time. On SQLite, this host's clock (one host)."""
    connection = connections[using]
    block = _outermost(connection)
    if block is not None:
        found = getattr(connection, _REMEMBERED, None)
        if found is not None and found[0]() is block:
            return found[1] + timedelta(seconds=time.monotonic() - found[2])
    now = now_of(connection)
    remember(connection, now)
    return now
