"""How idle executors are woken: a committed enqueue (the listener's NOTIFY), a stop, or the poll interval."""

from __future__ import annotations

import threading


class WorkSignal:
    """Wakes idle executors. Tokens remember wake-ups that came while every executor was busy."""

    def __init__(self, limit: int) -> None:
        self._cond = threading.Condition()
        self._tokens = 0
        self._limit = max(1, limit)

    def wake(self, count: int = 1) -> None:
        with self._cond:
            self._tokens = min(self._limit, self._tokens + max(1, count))
            self._cond.notify(self._tokens)

    def wake_all(self) -> None:
        self.wake(self._limit)

    def wait(self, timeout: float) -> None:
        with self._cond:
            if self._tokens == 0:
                self._cond.wait(timeout)
            if self._tokens:
                self._tokens -= 1
