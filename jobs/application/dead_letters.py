"""Telling a handler's dead-letter hook (`registry.on_dead_letter`) that one of its jobs ended for good.

Called where a job becomes a dead letter: an executor recording a failed attempt, the main thread recording a
runaway's timeout, the rescue of an expired lease, the expiry of a job that never started.
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS

from jobs.application.registry import DeadLetter, dead_letter_hook
from jobs.infrastructure.connections import reset_handler_connections
from kernel.failures import format_error

log = logging.getLogger("relay.worker")


def tell_hook(letter: DeadLetter, *, queue_using: str, handler_using: str = DEFAULT_DB_ALIAS) -> None:
    """Tell the handler's dead-letter hook, if it has one, on this thread's ordinary connection.

    A hook that fails is logged and left: the job stays a dead letter an operator can retry. Whatever the
    hook leaves open on this thread's connections is rolled back, as a handler's is.
    """
    hook = dead_letter_hook(letter.handler)
    if hook is None:
        return
    try:
        hook(letter)
    except Exception as exc:
        log.error("dead-letter hook of job %s (%s) failed: %s", letter.id, letter.handler, format_error(exc))
        reset_handler_connections(handler_using, queue_using, force=True)
        return
    if reset_handler_connections(handler_using, queue_using):
        log.error("dead-letter hook of job %s (%s) left a transaction open; rolled back", letter.id, letter.handler)
