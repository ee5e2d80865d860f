"""W2's measure of pickup latency, shared by queue_throughput.py, queue_scale.py and outbox_latency.py.

The `bench.latency` handler (bench/handlers.py) appends "seq time" to the file its payload names as its first
statement; latency is that time minus the moment the enqueuing call (or its transaction) returned. The
scripts take this module from their own checkout, so an A/B run with `--code` uses this copy.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Put = Callable[[int, str], None]  # enqueue one bench.latency job: (seq, path of the log)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def summary(latencies_ms: list[float]) -> dict[str, Any]:
    return {
        "received": len(latencies_ms),
        "p50_ms": round(pct(latencies_ms, 50), 2),
        "p95_ms": round(pct(latencies_ms, 95), 2),
        "p99_ms": round(pct(latencies_ms, 99), 2),
        "max_ms": round(max(latencies_ms), 2),
    }


class PickupLog:
    """One measurement's file: warm the workers up, enqueue at a steady pace, wait, read the latencies."""

    def __init__(self, prefix: str) -> None:
        self.path = tempfile.mktemp(prefix=prefix, suffix=".txt")  # noqa: S306 - the handler appends to it
        Path(self.path).touch()
        self.committed: dict[int, float] = {}

    def seen(self) -> dict[int, float]:
        return {int(s): float(t) for s, t in (line.split() for line in Path(self.path).read_text().splitlines())}

    def warm_up(self, put: Put, *, jobs: int = 5, timeout: float = 60, idle: float = 2.0, what: str = "") -> None:
        """`jobs` jobs (negative seqs) run, so the workers are up and listening; then `idle` s for them to idle."""
        for s in range(jobs):
            put(-1 - s, self.path)
        deadline = time.time() + timeout
        while len([k for k in self.seen() if k < 0]) < jobs:
            if time.time() > deadline:
                raise RuntimeError(f"warm-up jobs not processed{what}")
            time.sleep(0.05)
        time.sleep(idle)

    def paced(self, count: int, gap: float, put: Put, *, timeout: float = 60) -> None:
        """`count` jobs `gap` s apart, each time noted as its enqueue returns; then wait until all ran."""
        base = time.time()
        for i in range(count):
            delay = base + i * gap - time.time()
            if delay > 0:
                time.sleep(delay)
            put(i, self.path)
            self.committed[i] = time.time()
        deadline = time.time() + timeout
        while not all(i in self.seen() for i in range(count)) and time.time() < deadline:
            time.sleep(0.1)

    def latencies_ms(self, keep: Callable[[int], bool] = lambda i: True) -> list[float]:
        got = self.seen()
        return [(got[i] - t) * 1000 for i, t in self.committed.items() if i in got and keep(i)]

    def remove(self) -> None:
        os.unlink(self.path)
