"""The worker's LISTEN connection: it says when notifications stop, and it notices a dead peer."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from jobs.infrastructure.listener import KEEPALIVE_PARAMS, NotificationListener
from tests.support.processes import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CHANNEL = "relay_test_listener"


class States:
    def __init__(self) -> None:
        self.seen: list[bool] = []
        self.changed = threading.Event()

    def __call__(self, active: bool) -> None:
        self.seen.append(active)
        self.changed.set()

    @property
    def current(self) -> bool:
        return bool(self.seen) and self.seen[-1]


def listener(states: States, on_channel) -> NotificationListener:
    return NotificationListener(
        connection,
        None,
        on_wake=lambda count: None,
        on_connect=lambda: None,
        channels=[CHANNEL],
        on_channel=on_channel,
        on_listening=states,
    )


def notify(payload: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def test_a_failing_callback_clears_listening_and_the_listener_reconnects():
    """Not only psycopg's errors: whatever ends the connection, nothing may go on trusting it."""
    states = States()
    calls: list[str | None] = []

    def on_channel(channel: str, payload: str | None) -> None:
        calls.append(payload)
        if payload == "boom":
            raise RuntimeError("a cache callback broke")

    thread = listener(states, on_channel)
    thread.start()
    try:
        wait_until(lambda: states.current, 10, "the listener to listen")
        notify("boom")
        wait_until(lambda: False in states.seen, 10, "listening to be cleared")
        wait_until(lambda: states.seen.count(True) >= 2, 10, "the listener to reconnect")
        assert calls.count(None) >= 2  # each (re)connection tells the channel to forget everything
        assert thread.is_alive()
    finally:
        thread.stop()
        thread.join(5)
    assert states.seen[-1] is False


def test_the_listener_connection_has_keepalives_and_a_heartbeat():
    states = States()
    thread = listener(states, lambda channel, payload: None)
    for key, value in KEEPALIVE_PARAMS.items():
        assert thread._params[key] == value
    thread.heartbeat_seconds = 0.2
    thread.start()
    try:
        wait_until(lambda: states.current, 10, "the listener to listen")

        def last_query() -> str | None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT query FROM pg_stat_activity WHERE application_name = 'relay-listener'"
                    " AND datname = current_database()"
                )
                rows = cursor.fetchall()
            return rows[0][0] if rows else None

        time.sleep(0.5)
        wait_until(lambda: last_query() == "SELECT 1", 10, "a heartbeat on the listener connection")
    finally:
        thread.stop()
        thread.join(5)
