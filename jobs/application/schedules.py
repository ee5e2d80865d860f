"""Cron schedules: each tick enqueues its job exactly once, however many workers run.

Every worker looks for due schedules; advancing next_run_at is a
compare-and-set in the same transaction as the enqueue, so only one worker
wins a tick, and the job exists if and only if the tick was taken.

Due is decided on the database's clock, and the next tick is computed from
it, never from the worker host's: a worker whose clock runs fast would
otherwise fire a tick early and compute the next one from its future, so
that another tick never fires. A tick that fires late (no worker ran) fires
once; the ticks it stands for are counted in `missed_ticks`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from jobs.application.queue import enqueue
from jobs.application.registry import is_registered
from jobs.domain.schedule import (
    InvalidCron,
    InvalidTimeZone,
    next_tick,
    ticks_missed,
    validate_cron,
    validate_time_zone,
)
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Schedule
from kernel.failures import format_error

log = logging.getLogger("relay.worker")

BUILTIN_SCHEDULES: dict[str, dict[str, Any]] = {
    "relay.purge_jobs": {"cron": "17 * * * *", "handler": "jobs.purge"},
}


def builtin_schedule(name: str, *, cron: str, handler: str, payload: dict[str, Any] | None = None) -> None:
    """A schedule an app needs to work (registered from its AppConfig.ready); JOB_SCHEDULES may override it."""
    BUILTIN_SCHEDULES[name] = {"cron": cron, "handler": handler, "payload": payload or {}}


def schedule_problems(*, cron: str, handler: str, payload: Any, timezone: str = "UTC") -> dict[str, str]:
    """What is wrong with a schedule, by field; empty when it can fire."""
    problems = {}
    try:
        validate_cron(cron)
    except InvalidCron as exc:
        problems["cron"] = str(exc)
    try:
        validate_time_zone(timezone)
    except InvalidTimeZone as exc:
        problems["timezone"] = str(exc)
    if not is_registered(handler):
        problems["handler"] = f"no job handler named {handler!r} is registered"
    if not isinstance(payload, dict):
        problems["payload"] = "must be a JSON object"
    return problems


def configured_schedules() -> dict[str, dict[str, Any]]:
    return {**BUILTIN_SCHEDULES, **getattr(settings, "JOB_SCHEDULES", {})}


def sync_schedules(using: str | None = None) -> None:
    """Create or update the schedules named in settings; schedules made in the admin are left alone."""
    using = using or queue_database()
    now = database_now(using)
    for name, spec in configured_schedules().items():
        problems = schedule_problems(
            cron=spec["cron"],
            handler=spec["handler"],
            payload=spec.get("payload", {}),
            timezone=spec.get("timezone", "UTC"),
        )
        if problems:
            raise ImproperlyConfigured(f"JOB_SCHEDULES[{name!r}]: {problems}")
        cron = validate_cron(spec["cron"])
        defaults = {
            "cron": cron,
            "handler": spec["handler"],
            "payload": spec.get("payload", {}),
            "queue": spec.get("queue", "default"),
            "priority": spec.get("priority", 0),
            "timezone": spec.get("timezone", "UTC"),
        }
        schedule = Schedule.objects.using(using).filter(name=name).first()
        if schedule is None:
            Schedule.objects.using(using).get_or_create(
                name=name, defaults={**defaults, "next_run_at": next_tick(cron, now, defaults["timezone"])}
            )
        elif any(getattr(schedule, k) != v for k, v in defaults.items()):
            changed_ticks = schedule.cron != cron or schedule.timezone != defaults["timezone"]
            for key, value in defaults.items():
                setattr(schedule, key, value)
            if changed_ticks:
                schedule.next_run_at = next_tick(cron, now, schedule.timezone)
            schedule.save(using=using)


def fire_due_schedules(using: str | None = None) -> int:
    """Fire every schedule due by the database's clock (one query when none is)."""
    using = using or queue_database()
    due = list(Schedule.objects.using(using).filter(enabled=True, next_run_at__lte=Now()))
    if not due:
        return 0
    now = database_now(using)
    fired = 0
    for schedule in due:
        tick = schedule.next_run_at
        try:
            fired += _fire(schedule, tick, now, using)
        except Exception as exc:  # one broken schedule (edited by hand) must not stop the others
            log.error("schedule %s cannot fire: %s", schedule.name, format_error(exc))
    return fired


def _fire(schedule: Schedule, tick, now, using: str) -> int:
    missed = ticks_missed(schedule.cron, tick, now, schedule.timezone)
    with transaction.atomic(using=using):
        won = (
            Schedule.objects.using(using)
            .filter(pk=schedule.pk, next_run_at=tick)
            .update(
                next_run_at=next_tick(schedule.cron, now, schedule.timezone),
                last_run_at=tick,
                missed_ticks=F("missed_ticks") + missed,
            )
        )
        if not won:
            return 0  # another worker took this tick
        extra = {"missed_ticks": missed} if missed else {}
        enqueue(
            schedule.handler,
            {**schedule.payload, "scheduled_for": tick.isoformat(), **extra},
            queue=schedule.queue,
            priority=schedule.priority,
            unique_key=f"schedule:{schedule.name}:{tick.isoformat()}",
            using=using,
        )
    if missed:
        log.warning("schedule %s fired for %s, late: %d later ticks folded into it", schedule.name, tick, missed)
    else:
        log.info("schedule %s fired for %s", schedule.name, tick.isoformat())
    return 1
