"""Now, as the database tells it: the one clock every host agrees on (docs/decisions/database-clock.md).

Apps that cannot reach the database's clock themselves (contacts, whose events carry the time they happened)
ask `now()`. What answers is a port: the jobs app wires it at start-up (`AppConfig.ready`) to the database's
now, read once per transaction; until then (plain Python, a unit test) it is this host's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


def _host_now() -> datetime:
    return datetime.now(UTC)


_source: Callable[[], datetime] = _host_now


def read_with(source: Callable[[], datetime] | None) -> None:
    """Answer `now()` from `source` from here on (None: this host's clock)."""
    global _source
    _source = source or _host_now


def now() -> datetime:
    """The database's now for the caller's unit of work (aware, UTC)."""
    return _source()
