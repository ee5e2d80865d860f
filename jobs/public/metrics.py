"""Another app's Prometheus metrics, exposed at /metrics beside the queue's.

    from jobs.public import metrics

    metrics.register_counter("relay_runs_started_total", "Runs started.", ("workflow",))
    metrics.count(("relay_runs_started_total", metrics.labels_key(workflow="12")), 1)

Counters are added up per process and flushed to the database; a gauge's `compute` runs in one worker at a
time, on a `CountPass` (the database's now, and counts several gauges share).
"""

from jobs.application.metrics import CountPass, count, labels_key, register_counter, register_gauge
from jobs.application.queue_counts import AccountLoad

__all__ = ["AccountLoad", "CountPass", "count", "labels_key", "register_counter", "register_gauge"]
