"""The queue's own handlers."""

import logging
from typing import Any

from django.conf import settings

from jobs.application.context import JobContext
from jobs.application.operations import job_purge
from jobs.application.registry import job_handler, payload_check
from jobs.application.schedules import SCHEDULED_TASK, run_scheduled_task, scheduled_task_problems

log = logging.getLogger("relay.jobs")


@job_handler("log_message")
def log_message(payload: dict[str, Any], job: JobContext) -> None:
    """The smallest proof that the queue runs: write the payload's message to the log."""
    log.info("log_message: %s", payload.get("message", ""))


@job_handler("noop")
def noop(payload: dict[str, Any], job: JobContext) -> None:
    """Does nothing; the benchmarks measure the queue itself with it."""


@job_handler("jobs.purge")
def purge(payload: dict[str, Any], job: JobContext) -> None:
    """Delete finished jobs past JOB_RETENTION_DAYS (dead letters past JOB_DEAD_LETTER_RETENTION_DAYS)."""
    deleted = job_purge(
        retention_days=settings.JOB_RETENTION_DAYS,
        dead_letter_retention_days=settings.JOB_DEAD_LETTER_RETENTION_DAYS,
    )
    log.info("purged %d finished jobs", deleted)


@job_handler(SCHEDULED_TASK)
def scheduled_task(payload: dict[str, Any], job: JobContext) -> None:
    """A schedule's tick that runs any registered job: `{"handler": "send_email", "payload": {...}}` (and
    optionally `queue`, `priority`, `account`, `max_attempts`, `expires_in`) queues that job with exactly that
    payload, once per tick. Schedule it from the admin (Schedules) or JOB_SCHEDULES."""
    run_scheduled_task(payload, job)


@payload_check(SCHEDULED_TASK)
def check_scheduled_task(payload: dict[str, Any]) -> dict[str, str]:
    return scheduled_task_problems(payload)
