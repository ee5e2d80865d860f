"""Prometheus metrics: what the queue counts, what one worker computes per interval, and how a scrape reads them.

Three kinds of numbers, each with one home:

- **Counters** (attempts by outcome, lease expiries, the pickup-latency histogram, runs started and finished):
  every process counts in memory (`count`, `observe_pickup`; a dictionary update under a lock, nothing on the
  hot path touches the database) and adds what it counted to the database now and then (`flush`: a worker's
  maintenance thread every FLUSH_SECONDS and when it stops, a web process at the end of a request at most that
  often). A scrape reads the sums, so any web process serves the whole installation's numbers.
- **Gauges** (jobs due, the oldest due job's wait, dead letters, per-account running jobs and runs against
  their limits, runs by status): counted by one worker per JOB_METRICS_INTERVAL across all workers
  (`refresh_gauges`, from its maintenance thread), never by a scrape. A count that fails or takes more than
  COUNT_TIMEOUT_SECONDS publishes nothing, and its gauge keeps its last numbers.
- **The text** (`render`): prometheus-client's exposition of what is stored.

Other apps add their own with `register_counter` / `register_gauge` from their AppConfig.ready(): the queue
knows nothing of workflows. The queue's own gauges count through `jobs.application.queue_counts`, the
selectors the admin's dashboard uses too.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from django.db import connections, transaction
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from jobs.application.queue_counts import AccountLoad, dead_letter_count, due_summary, running_jobs_by_account
from jobs.infrastructure import metrics as store
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import queue_database
from kernel.failures import format_error

log = logging.getLogger("relay.metrics")
_T = TypeVar("_T")

FLUSH_SECONDS = 5.0  # a process adds its counted numbers to the database at most this often
COUNT_TIMEOUT_SECONDS = 10.0  # a gauge's count that takes longer publishes nothing

# --- what is counted ----------------------------------------------------------------------------------

ATTEMPTS = "relay_jobs_attempts_total"
LEASE_EXPIRIES = "relay_jobs_lease_expiries_total"
EXPIRED_JOBS = "relay_jobs_expired_total"
PICKUP_LATENCY = "relay_jobs_pickup_latency_seconds"
VACUUMS = "relay_jobs_vacuums_total"  # jobs.application.vacuum
SNOOZES = "relay_jobs_snoozes_total"  # a handler put its job back for later (jobs.domain.snooze)
PICKUP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(frozen=True)
class CounterDef:
    name: str  # ends in _total
    help: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class GaugeDef:
    name: str
    help: str
    labels: tuple[str, ...]
    compute: Callable[[CountPass], Iterable[tuple[dict[str, str], float]]]


_counters: dict[str, CounterDef] = {}
_gauges: dict[str, GaugeDef] = {}


def register_counter(name: str, help: str, labels: tuple[str, ...] = ()) -> None:
    _counters[name] = CounterDef(name, help, labels)


def register_gauge(
    name: str,
    help: str,
    labels: tuple[str, ...] = (),
    *,
    compute: Callable[[CountPass], Iterable[tuple[dict[str, str], float]]],
) -> None:
    """A gauge computed by the refreshing worker: `compute(counts)` gives (labels, value) pairs, with
    `counts.using`, `counts.now` (the database's) and `counts.once(key, fn)` for a count several gauges share."""
    _gauges[name] = GaugeDef(name, help, labels, compute)


def registered_gauges() -> list[str]:
    return sorted(_gauges)


def labels_key(**labels: str) -> str:
    """The canonical stored form of a label set."""
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":")) if labels else ""


ATTEMPT_SUCCEEDED = (ATTEMPTS, labels_key(outcome="succeeded"))
ATTEMPT_RETRIED = (ATTEMPTS, labels_key(outcome="retried"))
ATTEMPT_DEAD_LETTERED = (ATTEMPTS, labels_key(outcome="dead_lettered"))
LEASE_EXPIRED = (LEASE_EXPIRIES, "")
JOB_EXPIRED = (EXPIRED_JOBS, "")


def snoozed(handler: str) -> tuple[str, str]:
    """The series of one handler's snoozes (handlers are registered names: a bounded set of labels)."""
    return (SNOOZES, labels_key(handler=handler))


# --- the process's own counts ---------------------------------------------------------------------------


class Recorder:
    """What this process counted and has not yet added to the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], float] = {}
        self._buckets = [0] * (len(PICKUP_BUCKETS) + 1)  # the last one is +Inf
        self._latency_sum = 0.0
        self._last_flush = time.monotonic()

    def count(self, series: tuple[str, str], amount: float = 1.0) -> None:
        if amount:
            with self._lock:
                self._counts[series] = self._counts.get(series, 0.0) + amount

    def observe_pickup(self, seconds: Iterable[float]) -> None:
        with self._lock:
            for value in seconds:
                value = max(0.0, value)
                self._buckets[bisect.bisect_left(PICKUP_BUCKETS, value)] += 1
                self._latency_sum += value

    def take(self) -> dict[tuple[str, str], float]:
        """Everything counted since the last take, as stored series (the histogram's buckets not cumulative)."""
        with self._lock:
            counts, self._counts = self._counts, {}
            buckets, self._buckets = self._buckets, [0] * (len(PICKUP_BUCKETS) + 1)
            latency_sum, self._latency_sum = self._latency_sum, 0.0
            self._last_flush = time.monotonic()
        if any(buckets):
            for bound, n in zip((*PICKUP_BUCKETS, float("inf")), buckets, strict=True):
                if n:
                    counts[(f"{PICKUP_LATENCY}_bucket", labels_key(le=_le(bound)))] = n
            counts[(f"{PICKUP_LATENCY}_sum", "")] = latency_sum
        return counts

    def give_back(self, counts: dict[tuple[str, str], float]) -> None:
        """Counts a flush could not store are kept for the next one."""
        with self._lock:
            for series, amount in counts.items():
                self._counts[series] = self._counts.get(series, 0.0) + amount

    def due(self, every: float) -> bool:
        return time.monotonic() - self._last_flush >= every


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


recorder = Recorder()
count = recorder.count
observe_pickup = recorder.observe_pickup


def flush(using: str | None = None) -> None:
    """Add what this process counted to the stored counters (kept for the next flush if the database fails)."""
    using = using or queue_database()
    counts = recorder.take()
    if not counts:
        return
    try:
        store.add_counts(counts, using=using)
    except Exception:
        recorder.give_back(counts)
        raise


def flush_if_due(using: str | None = None, every: float = FLUSH_SECONDS) -> None:
    using = using or queue_database()
    if recorder.due(every):
        flush(using)


def flush_after_request(**kwargs) -> None:
    """request_finished: a web process's counts (runs started by the API) reach the database too."""
    if not recorder.due(FLUSH_SECONDS):
        return
    try:
        flush()
    except Exception as exc:  # a request already answered; the counts wait for the next flush
        log.warning("could not store metrics: %s", format_error(exc))


# --- gauges: one worker per interval ----------------------------------------------------------------------


_last_try: float | None = None  # when this process last asked for the refresh (monotonic)


def refresh_gauges(*, interval: float, worker_id: str, using: str | None = None) -> bool:
    """Compute every gauge if this worker takes the refresh due now (one per interval across all workers).

    One transaction (statement_timeout COUNT_TIMEOUT_SECONDS on PostgreSQL), the database's now read once,
    each gauge in a savepoint: a count that fails or takes longer (measured too, for SQLite) publishes
    nothing and its gauge keeps its last numbers; the others are published. `interval` 0 or less: counts
    are off. Returns whether this worker refreshed.
    """
    using = using or queue_database()
    global _last_try
    if interval <= 0:
        return False
    now = time.monotonic()
    if _last_try is not None and now - _last_try < min(interval / 2, 5.0):
        return False  # asked lately: a maintenance pass every poll interval need not ask every time
    _last_try = now
    if not store.take_refresh(interval, worker_id, using):
        return False
    with transaction.atomic(using=using):
        connection = connections[using]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {int(COUNT_TIMEOUT_SECONDS * 1000)}")
        counts = CountPass(using, database_now(using))
        for gauge in list(_gauges.values()):
            started = time.monotonic()
            try:
                with transaction.atomic(using=using):
                    values = [(labels_key(**labels), float(value)) for labels, value in gauge.compute(counts)]
                    if time.monotonic() - started > COUNT_TIMEOUT_SECONDS:
                        raise CountTooSlow(f"took {time.monotonic() - started:.1f} s")
                    store.publish_gauge(gauge.name, values, using=using, at=counts.now)
            except Exception as exc:
                log.warning("metric %s not refreshed (kept its last numbers): %s", gauge.name, format_error(exc))
    return True


class CountTooSlow(Exception):
    """A count that took longer than COUNT_TIMEOUT_SECONDS: what it found is not published."""


@dataclass
class CountPass:
    """One refresh: the database's now, and the counts several gauges share (made once, failures too)."""

    using: str
    now: datetime
    _done: dict[str, object] = field(default_factory=dict)

    def once(self, key: str, count: Callable[[], _T]) -> _T:
        if key not in self._done:
            started = time.monotonic()
            try:
                value: object = count()
                if time.monotonic() - started > COUNT_TIMEOUT_SECONDS:
                    value = CountTooSlow(f"{key} took {time.monotonic() - started:.1f} s")
            except Exception as exc:
                value = exc
            self._done[key] = value
        value = self._done[key]
        if isinstance(value, Exception):
            raise value
        return value  # type: ignore[return-value]


# --- the queue's own gauges (counted by `jobs.application.queue_counts`, as the admin's dashboard is) ------


def _due(counts: CountPass) -> tuple[int, float]:
    return counts.once("jobs.due", lambda: due_summary(now=counts.now, using=counts.using))


def _running(counts: CountPass) -> list[AccountLoad]:
    return counts.once("jobs.running", lambda: running_jobs_by_account(using=counts.using))


register_counter(
    ATTEMPTS, "Attempts the workers recorded, by outcome (succeeded, retried, dead_lettered).", ("outcome",)
)
register_counter(LEASE_EXPIRIES, "Jobs whose lease passed (their worker died) and that were rescued.")
register_counter(
    SNOOZES,
    "Snoozes the workers recorded, by handler: a job put back until later by its handler, not counted as an attempt.",
    ("handler",),
)
register_counter(
    VACUUMS,
    "VACUUMs (kind=vacuum, with ANALYZE when due) and ANALYZEs the workers ran on the queue's tables because"
    " autovacuum was off or late.",
    ("table", "kind"),
)
register_counter(
    EXPIRED_JOBS, "Jobs dead-lettered as expired: not started before their deadline (no attempt was made)."
)
register_gauge(
    "relay_jobs_due",
    "Jobs a worker could claim now (pending or retrying, due).",
    compute=lambda counts: [({}, _due(counts)[0])],
)
register_gauge(
    "relay_jobs_oldest_due_age_seconds",
    "Seconds the oldest due job has waited past its due time; 0 when none is due.",
    compute=lambda counts: [({}, _due(counts)[1])],
)
register_gauge(
    "relay_jobs_dead_lettered",
    "Dead letters still stored: dead, failed and cancelled jobs.",
    compute=lambda counts: [({}, dead_letter_count(using=counts.using))],
)
register_gauge(
    "relay_account_running_jobs",
    "Jobs running now, per account with any running.",
    ("account",),
    compute=lambda counts: [({"account": load.slug}, load.running) for load in _running(counts)],
)
register_gauge(
    "relay_account_running_jobs_limit",
    "max_concurrent_jobs of each account with a job running.",
    ("account",),
    compute=lambda counts: [({"account": load.slug}, load.limit) for load in _running(counts)],
)

# --- the exposition ---------------------------------------------------------------------------------------


class StoredMetrics:
    """A prometheus-client collector over the stored numbers."""

    def __init__(self, using: str | None = None, *, gauges_on: bool = True) -> None:
        using = using or queue_database()
        self.using = using
        self.gauges_on = gauges_on

    def collect(self):
        counted: dict[str, list[tuple[dict[str, str], float]]] = {}
        for name, labels, value in store.counters(self.using):
            counted.setdefault(name, []).append((json.loads(labels) if labels else {}, value))
        for definition in _counters.values():
            family = CounterMetricFamily(definition.name, definition.help, labels=definition.labels)
            for labels, value in counted.get(definition.name, []):
                family.add_metric([labels.get(label, "") for label in definition.labels], value)
            yield family
        yield _histogram(counted)
        if not self.gauges_on:
            return
        stored: dict[str, list[tuple[dict[str, str], float]]] = {}
        for name, labels, value, _at in store.gauges(self.using):
            stored.setdefault(name, []).append((json.loads(labels) if labels else {}, value))
        for definition in _gauges.values():
            family = GaugeMetricFamily(definition.name, definition.help, labels=definition.labels)
            for labels, value in stored.get(definition.name, []):
                family.add_metric([labels.get(label, "") for label in definition.labels], value)
            yield family
        refreshed = store.last_refresh(self.using)
        family = GaugeMetricFamily(
            "relay_metrics_refreshed_timestamp_seconds", "When a worker last took the gauges' refresh (Unix time)."
        )
        if refreshed is not None:
            family.add_metric([], refreshed.timestamp())
        yield family


def _histogram(counted: dict[str, list[tuple[dict[str, str], float]]]) -> HistogramMetricFamily:
    per_bound = {labels["le"]: value for labels, value in counted.get(f"{PICKUP_LATENCY}_bucket", [])}
    cumulative, buckets = 0.0, []
    for bound in (*PICKUP_BUCKETS, float("inf")):
        cumulative += per_bound.get(_le(bound), 0.0)
        buckets.append((_le(bound), cumulative))
    total = sum(value for _labels, value in counted.get(f"{PICKUP_LATENCY}_sum", []))
    return HistogramMetricFamily(
        PICKUP_LATENCY,
        "Seconds from a job's due time (its commit, when queued to run now) to its handler's start.",
        buckets=buckets,
        sum_value=total,
    )


def render(*, using: str | None = None, gauges_on: bool = True) -> bytes:
    """The Prometheus text exposition of every stored metric (reads only; computes no count)."""
    using = using or queue_database()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoredMetrics(using, gauges_on=gauges_on))
    return generate_latest(registry)
