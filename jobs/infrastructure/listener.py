"""LISTEN/NOTIFY on PostgreSQL: wake idle executors the moment an enqueue commits.

A dedicated connection in its own thread blocks on the notification socket.
When the connection drops it reconnects with backoff, and wakes every
executor once connected (a notification may have been missed meanwhile);
the poll interval covers the time in between.

A connection that only listens never writes, so a half-open one (the server
or a NAT box forgot it) would look healthy forever while notifications stop:
caches trusting it (the workflow engine's trigger cache) would go stale. So
the connection has TCP keepalives and a user timeout, and sends `SELECT 1`
every HEARTBEAT_SECONDS; a dead peer then surfaces as an error within about
a minute and the listener reconnects (which tells every channel to forget).
"Listening" is cleared however the connection ends (finally), so nothing
trusts notifications that no longer come.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import psycopg

from jobs.infrastructure.store import NOTIFY_CHANNEL

log = logging.getLogger("relay.worker")

HEARTBEAT_SECONDS = 15.0
# libpq options (the caller's own settings win): probe an idle connection after 10 s, every 5 s, give up
# after 3 misses; and drop it when sent data stays unacknowledged for 20 s (a heartbeat to a dead peer).
KEEPALIVE_PARAMS = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}


class NotificationListener(threading.Thread):
    def __init__(
        self,
        django_connection,
        queues: Sequence[str] | None,
        *,
        on_wake: Callable[[int], None],
        on_connect: Callable[[], None],
        channels: Sequence[str] = (),
        on_channel: Callable[[str, str | None], None] = lambda channel, payload: None,
        on_listening: Callable[[bool], None] = lambda active: None,
        wake_channel: str | None = NOTIFY_CHANNEL,
    ) -> None:
        """`channels`: other apps' channels; `on_channel(channel, payload)` gets their notifications, and
        `on_channel(channel, None)` after each (re)connection, since some may have been missed meanwhile.
        `on_listening(active)` says whether notifications are being received. `wake_channel`: the channel
        whose notifications ("<queue> <count>") call `on_wake` (None: none, only the apps' channels)."""
        super().__init__(name="notification-listener", daemon=True)
        params = dict(django_connection.get_connection_params())
        for key in ("cursor_factory", "context", "prepare_threshold", "pool", "server_side_binding"):
            params.pop(key, None)
        params["application_name"] = "relay-listener"
        for key, value in KEEPALIVE_PARAMS.items():
            params.setdefault(key, value)
        self._params = params
        self._queues = set(queues) if queues else None
        self._on_wake = on_wake
        self._on_connect = on_connect
        self._wake_channel = wake_channel
        self._channels = list(channels)
        self._on_channel = on_channel
        self._on_listening = on_listening
        self._stopped = threading.Event()
        self.connected = threading.Event()
        self.heartbeat_seconds = HEARTBEAT_SECONDS

    def stop(self) -> None:
        self._on_listening(False)
        self._stopped.set()

    def run(self) -> None:
        backoff = 0.2
        while not self._stopped.is_set():
            try:
                try:
                    with psycopg.connect(autocommit=True, **self._params) as conn:
                        if self._wake_channel is not None:
                            conn.execute(f"LISTEN {self._wake_channel}")
                        for channel in self._channels:
                            conn.execute(f"LISTEN {channel}")
                        self.connected.set()
                        log.info(
                            "listening for %s notifications on %s",
                            "job" if self._wake_channel == NOTIFY_CHANNEL else "outbox and apps'",
                            ", ".join(c for c in [self._wake_channel, *self._channels] if c),
                        )
                        backoff = 0.2
                        self._on_connect()
                        for channel in self._channels:
                            self._on_channel(channel, None)  # whatever came while we were away is unknown
                        self._on_listening(True)
                        self._listen(conn)
                finally:
                    # However the connection ended, notifications no longer arrive: nothing may trust them.
                    self._on_listening(False)
                    self.connected.clear()
            except Exception as exc:  # psycopg's errors, or a callback's: reconnect either way
                if self._stopped.is_set():
                    return
                log.warning("notification listener lost its connection (%s); reconnecting", type(exc).__name__)
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _listen(self, conn: psycopg.Connection) -> None:
        last_heartbeat = time.monotonic()
        while not self._stopped.is_set():
            for note in conn.notifies(timeout=1.0):
                if note.channel == self._wake_channel:
                    self._dispatch(note.payload)
                else:
                    self._on_channel(note.channel, note.payload)
            if time.monotonic() - last_heartbeat >= self.heartbeat_seconds:
                conn.execute("SELECT 1")  # a dead peer raises here (tcp_user_timeout) instead of staying silent
                last_heartbeat = time.monotonic()

    def _dispatch(self, payload: str) -> None:
        queue, _, count = payload.rpartition(" ")
        if self._queues is not None and queue not in self._queues:
            return
        try:
            self._on_wake(int(count))
        except ValueError:
            self._on_wake(1)
