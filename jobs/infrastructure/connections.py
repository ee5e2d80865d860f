"""What the worker does to Django connections it does not own: a handler's, after the handler ran, and any
thread's, before the thread ends.

A handler runs on its thread's ordinary connection and may leave it in any state (a transaction open, a
statement running, an error). The worker cleans it up here so the next job (or dead-letter hook) starts afresh.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections

from kernel.failures import format_error

log = logging.getLogger("relay.worker")


def reset_handler_connection(connection: Any, *, force: bool = False) -> bool:
    """Leave the handler's connection clean for the next job. True when it had a transaction left open."""
    leaked = connection.in_atomic_block or (connection.connection is not None and not connection.autocommit)
    if leaked:  # forget the abandoned atomic blocks, so close() really closes (and rolls back)
        connection.in_atomic_block = False
        connection.savepoint_ids = []
        connection.needs_rollback = False
        connection.closed_in_transaction = False
        connection.atomic_blocks = []
    if leaked or force:
        connection.close()  # rolls back whatever the handler left open; the next job reconnects
    elif connection.errors_occurred:
        # Not after every job: close_if_unusable_or_obsolete() re-arms Django's health check, one
        # more round trip before the next job's first statement.
        connection.close_if_unusable_or_obsolete()
    return bool(leaked)


def reset_handler_connections(handler_using: str, queue_using: str, *, force: bool = False) -> bool:
    """Reset this thread's connection to the handlers' database, and to the queue's when it is apart (a
    handler's enqueue and mark_completed write there); True when one had a transaction left open."""
    leaked = reset_handler_connection(connections[handler_using], force=force)
    if handler_using != queue_using:
        leaked = reset_handler_connection(connections[queue_using], force=force) or leaked
    return leaked


def cancel_statement(connection: Any) -> None:
    """Cancel the statement a connection is running (a handler's at its deadline, a VACUUM at shutdown)."""
    raw = getattr(connection, "connection", None)
    if raw is None:
        return
    try:
        if connection.vendor == "postgresql":
            raw.cancel_safe(timeout=2.0)
        elif connection.vendor == "sqlite":
            raw.interrupt()
    except Exception as exc:
        log.debug("could not cancel a running statement: %s", format_error(exc))


def close_thread_connections(*aliases: str) -> None:
    """Close this thread's ordinary connections to these databases (each once)."""
    for alias in dict.fromkeys(aliases):
        connections[alias].close()
