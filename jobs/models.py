"""Django finds an app's models here; they live in the infrastructure layer."""

from jobs.infrastructure.models import Job, Lane, MetricCounter, MetricGauge, MetricRefresh, Schedule

__all__ = ["Job", "Lane", "MetricCounter", "MetricGauge", "MetricRefresh", "Schedule"]
