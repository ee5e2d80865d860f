"""Metrics flush (jobs.application.maintenance.metrics): what the process counted is stored, at the latest
when the service stops."""

import pytest

from jobs.application import metrics
from jobs.application.maintenance.metrics import MetricsFlush
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import MetricCounter

pytestmark = pytest.mark.django_db(transaction=True)


def _lease_expiries() -> float:
    return sum(MetricCounter.objects.filter(name=metrics.LEASE_EXPIRIES).values_list("value", flat=True))


def test_the_counts_left_at_stop_are_flushed_by_the_service_on_its_way_out():
    metrics.flush()
    before = _lease_expiries()
    service = MetricsFlush(using=queue_database(), worker_id="w1", interval=0, every=60.0)
    service.start()
    assert service.first_pass.wait(10)
    metrics.count(metrics.LEASE_EXPIRED, 3)  # after its pass: only the final flush can store it
    assert service.stop() is True
    assert _lease_expiries() == before + 3


def test_a_pass_flushes_when_due_and_asks_for_the_gauges(monkeypatch):
    asked = []
    monkeypatch.setattr(metrics, "refresh_gauges", lambda **kwargs: asked.append(kwargs) or False)
    metrics.flush()
    before = _lease_expiries()
    metrics.count(metrics.LEASE_EXPIRED, 2)
    monkeypatch.setattr(metrics.recorder, "_last_flush", 0.0)  # the last flush was long ago
    service = MetricsFlush(using=queue_database(), worker_id="w1", interval=30.0)
    service.run_once()
    assert _lease_expiries() == before + 2
    assert asked == [{"interval": 30.0, "worker_id": "w1", "using": queue_database()}]
    service.close()
