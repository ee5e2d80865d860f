"""Other apps' notification channels, carried by the worker's LISTEN connection.

The worker already holds a LISTEN connection for job wake-ups; an app that
keeps a cache in worker processes can register a channel here and be told
when to drop it:

    on_notification("relay_workflows", forget)   # forget(payload) on each NOTIFY,
                                                 # forget(None) after a reconnect
    notify("relay_workflows", str(account_id))   # in the changing transaction

`listening()` says whether notifications are being received right now: a
cache must not be trusted when they are not (web processes, SQLite, a lost
connection).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import DEFAULT_DB_ALIAS, connections

Callback = Callable[[str | None], None]

_callbacks: dict[str, list[Callback]] = {}
_listening = threading.Event()


def on_notification(channel: str, callback: Callback) -> None:
    if not channel.replace("_", "").isalnum():
        raise ValueError(f"a channel name is letters, digits and _: {channel!r}")
    callbacks = _callbacks.setdefault(channel, [])
    if callback not in callbacks:
        callbacks.append(callback)


def registered_channels() -> list[str]:
    return sorted(_callbacks)


def deliver(channel: str, payload: str | None) -> None:
    """Called by the listener: a notification, or None when some may have been missed."""
    for callback in _callbacks.get(channel, ()):
        callback(payload)


def set_listening(active: bool) -> None:
    if active:
        _listening.set()
    else:
        _listening.clear()


def listening() -> bool:
    return _listening.is_set()


def notify(channel: str, payload: str, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Send on commit of the caller's transaction (PostgreSQL); SQLite has no notifications.

    On `default`, not the queue's database: the apps' changes (and so their transactions) live there, and
    the worker listens to these channels on `default` when the queue has a database of its own.
    """
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])
