"""How big each scenario is: the short form (in every `make test` on PostgreSQL) or the full one (`make chaos`,
RELAY_CHAOS=full). Both check the same invariants; only the load and the number of faults differ. Under
`make chaos` the full sizes are the most a scenario runs: tests/chaos/budget.py shrinks a load (never below
its short size) to fit the scenario's share of the time, and the report says the size it ran. Any size can be
set on its own, for a loaded machine or a longer soak, and is then run as set: RELAY_CHAOS_<NAME>=<number>,
e.g. RELAY_CHAOS_KILL_JOBS=20000."""

from __future__ import annotations

import os

FULL = os.environ.get("RELAY_CHAOS", "").lower() == "full"

#                      short     full
_SIZES: dict[str, tuple[float, float]] = {
    "KILL_JOBS": (1500, 10_000),  # jobs drained while workers are killed
    "KILL_RUNS": (150, 2_000),  # workflow runs (3 steps each) drained while workers are killed
    "KILLS": (3, 10),  # kill -9 of a random worker, spread over the drain
    "WORKERS": (3, 3),  # runworker processes (concurrency 2 each) in the kill scenarios
    "CONNECTION_JOBS": (400, 2_000),  # jobs in flight when connections are cut or the server restarts
    "FROZEN_JOBS": (6, 8),  # jobs held by the worker frozen with SIGSTOP (two connections each, per worker)
    "SNAPSHOT_SECONDS": (12, 180),  # the steady load under an open REPEATABLE READ transaction (its middle 3/5)
    "SNAPSHOT_RATE": (40, 80),  # jobs per second of that load
    "BURST_JOBS": (2_000, 50_000),  # one account's burst
    "TRICKLE_JOBS": (30, 200),  # the other accounts' trickle beside it
    "SKEW_JOBS": (200, 1_000),  # jobs drained by a worker two minutes fast beside one on time
    "EMAIL_SENDS": (200, 2_000),  # send_email jobs to the test's SMTP server while workers are killed
    "EMAIL_KILLS": (2, 10),  # kill -9 of a random worker during those sends
}


def is_set(name: str) -> bool:
    """Whether RELAY_CHAOS_<NAME> sets this size (then it is run as set)."""
    return bool(os.environ.get(f"RELAY_CHAOS_{name}"))


def short_size(name: str) -> float:
    return _SIZES[name][0]


def full_size(name: str) -> float:
    return _SIZES[name][1]


def size(name: str) -> float:
    override = os.environ.get(f"RELAY_CHAOS_{name}")
    if override:
        return float(override)
    short, full = _SIZES[name]
    return full if FULL else short


def count(name: str) -> int:
    return int(size(name))
