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

from jobs.application.context import JobContext
from jobs.application.queue import JobSpec, enqueue
from jobs.application.registry import get_payload_check, is_registered
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import Schedule
from kernel.cron import (
    InvalidCron,
    InvalidTimeZone,
    next_tick,
    ticks_missed,
    validate_cron,
    validate_time_zone,
)
from kernel.failures import format_error

log = logging.getLogger("relay.worker")

BUILTIN_SCHEDULES: dict[str, dict[str, Any]] = {
    "relay.purge_jobs": {"cron": "17 * * * *", "handler": "jobs.purge"},
}


def builtin_schedule(name: str, *, cron: str, handler: str, payload: dict[str, Any] | None = None) -> None:
    """A schedule an app needs to work (registered from its AppConfig.ready); JOB_SCHEDULES may override it."""
    BUILTIN_SCHEDULES[name] = {"cron": cron, "handler": handler, "payload": payload or {}}


SCHEDULED_TASK = "scheduled_task"
# What a tick adds to its job's payload (`_fire`): a handler that checks its payload must accept these.
TICK_KEYS = {"scheduled_for": "2000-01-01T00:00:00+00:00", "missed_ticks": 1}
_TASK_FIELDS = ("handler", "payload", "queue", "priority", "account", "max_attempts", "expires_in")


def schedule_problems(*, cron: str, handler: str, payload: Any, timezone: str = "UTC") -> dict[str, str]:
    """What is wrong with a schedule, by field; empty when it can fire. The payload is checked as the tick will
    queue it (with `scheduled_for`), by the handler's own payload check, so a job that every tick would fail
    to queue is refused now."""
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
    elif "handler" not in problems and (check := get_payload_check(handler)) is not None:
        found = check({**payload, **TICK_KEYS})
        refused_tick = [key for key in TICK_KEYS if key in found]
        if refused_tick:
            problems["payload"] = (
                f"{' and '.join(refused_tick)}: {handler} refuses what each tick adds to its job's payload "
                f"({', '.join(TICK_KEYS)}); schedule it through {SCHEDULED_TASK}, payload "
                f'{{"handler": "{handler}", "payload": {{...}}}}, to give it exactly its own payload'
            )
        elif found:
            key, reason = sorted(found.items())[0]
            problems["payload"] = f"{key}: {reason}"
    return problems


def scheduled_task_problems(payload: dict[str, Any]) -> dict[str, str]:
    """The payload check of `scheduled_task`: the job it names can be queued with what it says."""
    problems: dict[str, str] = {}
    for key in payload:
        if key not in (*_TASK_FIELDS, *TICK_KEYS):
            problems[key] = f"is not a field of {SCHEDULED_TASK} (fields: {', '.join(_TASK_FIELDS)})"
    handler = payload.get("handler")
    task_payload = payload.get("payload", {})
    if not isinstance(handler, str) or not is_registered(handler):
        problems["handler"] = f"must name a registered job handler (not {str(handler)[:100]!r})"
    elif handler == SCHEDULED_TASK:
        problems["handler"] = f"must name the job to run, not {SCHEDULED_TASK} itself"
    if not isinstance(task_payload, dict):
        problems["payload"] = "must be a JSON object: the payload of the job it queues"
    elif "handler" not in problems and (check := get_payload_check(str(handler))) is not None:
        for key, reason in sorted(check(task_payload).items())[:1]:
            problems["payload"] = f"{key}: {reason}"
    queue = payload.get("queue", "default")
    if not isinstance(queue, str) or not 0 < len(queue) <= 100:
        problems["queue"] = "must be a queue name of 1 to 100 characters"
    for key in ("priority", "account", "max_attempts"):
        value = payload.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            problems[key] = "must be a whole number"
    expires_in = payload.get("expires_in")
    if expires_in is not None and (
        isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0
    ):
        problems["expires_in"] = "must be a number of seconds above 0"
    return problems


def run_scheduled_task(payload: dict[str, Any], job: JobContext) -> list[str]:
    """Queue the job a `scheduled_task` tick names, with exactly its payload, in the transaction that completes
    the tick's own job: each tick queues it once, even if a worker dies in between (the tick's job then runs
    again, and nothing was queued by the attempt that died). Returns the queued job's id."""
    spec = JobSpec(
        handler=str(payload["handler"]),
        payload=dict(payload.get("payload") or {}),
        queue=str(payload.get("queue") or "default"),
        priority=int(payload.get("priority") or 0),
        account=payload.get("account"),
        max_attempts=payload.get("max_attempts"),
        expires_in=payload.get("expires_in"),
    )
    with transaction.atomic(using=queue_database()):
        queued = job.mark_completed(then=[spec])
    log.info(
        "scheduled_task %s queued %s job %s (tick %s)", job.id, spec.handler, queued[0], payload.get("scheduled_for")
    )
    return [str(job_id) for job_id in queued]


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


# --- an app's own schedules (a workflow's scheduled hooks), by id ------------------------------------------
# Other apps create and change their schedules here (through jobs.public.schedules), never by writing the
# Schedule rows themselves: the first tick is computed on the database's clock, as a tick computes the next.


def schedule_create(
    *,
    name: str,
    cron: str,
    handler: str,
    payload: dict[str, Any],
    queue: str = "default",
    priority: int = 0,
    timezone: str = "UTC",
) -> Schedule:
    """A schedule whose first tick is the next one after the database's now; `cron` and `timezone` as validated
    by the caller (`schedule_problems`, or its own rules that include the queue's)."""
    return Schedule.objects.create(
        name=name,
        cron=cron,
        timezone=timezone,
        handler=handler,
        payload=payload,
        queue=queue,
        priority=priority,
        next_run_at=next_tick(cron, database_now(), timezone),
    )


def schedule_pause(*, schedule_id: int | None) -> None:
    """No tick fires until it is resumed (None, a schedule that is gone: nothing to do)."""
    Schedule.objects.filter(pk__in=[schedule_id]).update(enabled=False)


def schedule_resume(*, schedule_id: int | None) -> None:
    """Ticks fire again from the next one after the database's now: the ticks that passed while paused are not
    made up (they are not counted as missed either)."""
    schedule = Schedule.objects.filter(pk__in=[schedule_id]).only("cron", "timezone").first()
    if schedule is not None:
        Schedule.objects.filter(pk=schedule.pk).update(
            enabled=True, next_run_at=next_tick(schedule.cron, database_now(), schedule.timezone)
        )


def schedule_delete(*, schedule_id: int | None = None, name: str | None = None) -> None:
    """Delete the schedule with this id or this name, if there is one; a tick already queued still runs."""
    if schedule_id is not None:
        Schedule.objects.filter(pk=schedule_id).delete()
    if name is not None:
        Schedule.objects.filter(name=name).delete()
