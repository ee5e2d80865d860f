"""Which workflows an event starts, cached in worker processes, and the notification that keeps the cache true.

Application, not infrastructure: it decides when the database is asked
(RunStore.event_candidates is the query) and rides on the queue's
notification channels (jobs.application.notifications). It is wired by
WorkflowsConfig.ready(), never by importing this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from uuid import UUID

from django.conf import settings
from django.db import transaction

from jobs.public.operations import listening, notify, on_notification
from workflows.infrastructure.store import RunStore

TRIGGERS_CHANNEL = "relay_workflows"  # NOTIFY payload: the account whose workflows' triggers changed


Candidates = list[tuple[int, UUID]]  # (workflow id, current version id)
CacheKey = tuple[str, str | None]  # (event name, tag)


class TriggerCache:
    """Which active workflows an event starts, per account, kept in a worker process.

    Trusted only while the worker's LISTEN connection receives TRIGGERS_CHANNEL: publishing, pausing,
    activating, archiving, restoring or deleting a workflow notifies it in the same transaction, and a
    reconnection drops everything. Untrusted (web processes, SQLite, a listener that is down), every
    lookup reads the database. A generation number keeps an answer read before a notification from
    being stored after it. An answer is also kept at most `max_age` seconds: a notification can be
    lost without the listener noticing (a half-open connection until its keepalive gives up), and
    then a bounded staleness is the price rather than a stale answer forever. Starting a run checks
    the workflow again under the account lock in any case.
    """

    MAX_ENTRIES = 50_000

    def __init__(
        self,
        *,
        trusted: Callable[[], bool] = listening,
        max_age: Callable[[], float] | float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, dict[CacheKey, tuple[Candidates, float]]] = {}
        self._generation = 0
        self._size = 0
        self._trusted = trusted
        self._max_age = max_age
        self._clock = clock

    def trusted(self) -> bool:
        return self._trusted()

    def max_age(self) -> float:
        if self._max_age is None:
            return float(settings.WORKFLOW_TRIGGER_CACHE_MAX_AGE)
        return float(self._max_age() if callable(self._max_age) else self._max_age)

    def lookup(self, account_id: int, key: CacheKey, load: Callable[[], Candidates]) -> Candidates:
        """The cached answer when trusted and fresh; else `load()` (kept for next time when trusted)."""
        if not self.trusted():
            return load()
        found, generation = self.get(account_id, key)
        if found is None:
            found = load()
            self.put(account_id, key, found, generation)
        return found

    def get(self, account_id: int, key: CacheKey) -> tuple[Candidates | None, int]:
        with self._lock:
            entry = self._entries.get(account_id, {}).get(key)
            if entry is not None and self._clock() - entry[1] > self.max_age():
                entry = None  # too old to trust: the caller reads again and stores the fresh answer
            return (entry[0] if entry is not None else None), self._generation

    def put(self, account_id: int, key: CacheKey, value: Candidates, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return  # something changed while we read: the next call reads again
            if self._size >= self.MAX_ENTRIES:
                self._entries.clear()
                self._size = 0
            entries = self._entries.setdefault(account_id, {})
            if key not in entries:
                self._size += 1
            entries[key] = (value, self._clock())

    def forget(self, payload: str | None) -> None:
        """A notification for one account, or None: forget everything."""
        with self._lock:
            self._generation += 1
            if payload is None:
                self._entries.clear()
                self._size = 0
                return
            try:
                dropped = self._entries.pop(int(payload), {})
            except ValueError:
                self._entries.clear()
                self._size = 0
                return
            self._size -= len(dropped)


trigger_cache = TriggerCache()


def listen_for_trigger_changes() -> None:
    """Have the worker's LISTEN connection tell this process's cache of changes (WorkflowsConfig.ready())."""
    on_notification(TRIGGERS_CHANNEL, trigger_cache.forget)


def triggers_changed(account_id: int) -> None:
    """Call inside the transaction that changes which workflows an event starts (publish, status moves)."""
    notify(TRIGGERS_CHANNEL, str(account_id))
    transaction.on_commit(lambda: trigger_cache.forget(str(account_id)))


def event_candidates(store: RunStore, account_id: int, name: str, tag: str | None) -> Candidates:
    """(workflow id, current version id) of the account's active workflows triggered by this event.

    Every tag and contact change asks this. A worker keeps the answers while it receives the
    notifications that say an account's workflows changed (see TriggerCache); elsewhere it asks the
    database each time.
    """
    return trigger_cache.lookup(account_id, (name, tag), lambda: store.event_candidates(account_id, name, tag))
