"""Django finds an app's models here; they live in the infrastructure layer."""

from jobs.infrastructure.models import Job, Schedule

__all__ = ["Job", "Schedule"]
