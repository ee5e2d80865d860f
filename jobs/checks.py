"""System checks of the queue's settings: `manage.py check`, and every command that starts (runworker, the
web server), refuse a value the queue would misread."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

MAX_DEAD_LETTER_RETENTION_DAYS = 3650


@register("jobs")
def check_queue_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    problems: list[Error] = []
    days = settings.JOB_DEAD_LETTER_RETENTION_DAYS
    if days is not None and days > MAX_DEAD_LETTER_RETENTION_DAYS:
        problems.append(
            Error(
                f"JOB_DEAD_LETTER_RETENTION_DAYS is {days:g}; the most allowed is {MAX_DEAD_LETTER_RETENTION_DAYS}"
                " (ten years). Unset it, or set 0, to keep dead letters forever.",
                id="jobs.E001",
            )
        )
    if float(settings.JOB_METRICS_INTERVAL) < 0:
        problems.append(Error("JOB_METRICS_INTERVAL must be 0 (off) or a number of seconds.", id="jobs.E002"))
    from jobs.api.metrics import allowed_networks

    try:
        allowed_networks()
    except ValueError as exc:
        problems.append(Error(f"METRICS_ALLOWED_IPS: {exc}", id="jobs.E003"))
    return problems
