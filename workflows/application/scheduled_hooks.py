"""Scheduled hooks: create, pause, resume, delete, read; and what one tick does (the `scheduled_hook` job).

A hook's ticks are a jobs Schedule (`hook:<id>`, handler `scheduled_hook`, payload `{"hook": id}`), created,
paused, resumed and deleted with the hook in one transaction, through `jobs.public.schedules` (the rows are the
queue's): the queue fires each tick once however many workers run, on the database's clock, and folds ticks
missed while no worker ran into one (the hook shows how many). A tick is recorded as a ScheduledHookRun, unique
per (hook, tick), in the transaction that does its work: a retried job finds it and does nothing twice. A
deliver_webhook tick queues its delivery (a `scheduled_hook.deliver` job, retried as a webhook step is) and
stays `delivering` until that job says how it ended: succeeded, refused by the SSRF guard, or failed.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from accounts.application.accounts import account_lock
from contacts.application.selectors import contact_rows
from integrations.application.channels import webhook_client, webhook_target_problem
from integrations.domain.channels import WebhookRequest, failure_details
from jobs.public import enqueue
from jobs.public.schedules import schedule_create, schedule_delete, schedule_pause, schedule_resume
from jobs.public.storage import database_now, is_split
from kernel.failures import JobError, format_error, is_database_error
from workflows.application.errors import NotFound
from workflows.application.runs.starting import record_event, start_runs
from workflows.domain.errors import FieldError, WorkflowDomainError
from workflows.domain.scheduled_hooks import (
    HookAction,
    HookDefinition,
    HookLimits,
    HookRunStatus,
    HookStatus,
    InvalidHook,
    parse_hook,
)
from workflows.domain.triggers import ContactCondition, contact_matches, parse_contact_filter
from workflows.domain.validation import Reader, ValidationContext
from workflows.infrastructure.models import ScheduledHook, ScheduledHookRun, TriggerSource, Workflow
from workflows.infrastructure.store import CONTACT_COLUMNS

log = logging.getLogger("relay.workflows")

HOOK_HANDLER = "scheduled_hook"
DELIVERY_HANDLER = "scheduled_hook.deliver"
PURGE_RUNS_HANDLER = "workflows.purge_hook_runs"
START_CHUNK = 10_000  # start_many's most contacts per call
KEPT_IDS = 1_000  # execution ids a run record keeps (the count is exact)


class HookNotFound(NotFound):
    def __init__(self, hook_id: Any) -> None:
        super().__init__(f"no scheduled hook {hook_id}")


def _schedule_name(hook_id: int) -> str:
    return f"hook:{hook_id}"


# --- reads ----------------------------------------------------------------------------------------------


def _with_schedule(hooks: QuerySet[ScheduledHook]) -> QuerySet[ScheduledHook]:
    """Hooks with their schedule joined in, unless the schedules live in the queue's own database."""
    return hooks if is_split() else hooks.select_related("schedule")


def hook_list(*, account_id: int, status: str | None = None) -> QuerySet[ScheduledHook]:
    query = _with_schedule(ScheduledHook.objects.filter(account_id=account_id)).order_by("-created_at", "-id")
    if status:
        query = query.filter(status=status)
    return query


def hook_get(*, account_id: int, hook_id: int) -> ScheduledHook:
    hook = _with_schedule(ScheduledHook.objects.filter(account_id=account_id, pk=hook_id)).first()
    if hook is None:
        raise HookNotFound(hook_id)
    return hook


def hook_runs(*, account_id: int, hook_id: int) -> QuerySet[ScheduledHookRun]:
    hook_get(account_id=account_id, hook_id=hook_id)
    return ScheduledHookRun.objects.filter(hook_id=hook_id).order_by("-created_at", "-id")


# --- writes ---------------------------------------------------------------------------------------------


def hook_limits() -> HookLimits:
    """The per-account limits, read from the settings when they are applied (tests and operators change them)."""
    return HookLimits(
        max_hooks=int(settings.SCHEDULED_HOOK_MAX_PER_ACCOUNT),
        min_interval_minutes=int(settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES),
        max_contacts_per_tick=int(settings.SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK),
    )


def hook_create(*, account_id: int, definition: dict[str, Any], created_by_id: int | None = None) -> ScheduledHook:
    """Validate the whole hook (every problem by path) and the account's limits, then store it and its schedule
    together."""
    limits = hook_limits()
    hook = parse_hook(definition, check_webhook_target=webhook_target_problem, limits=limits)
    _check_references(account_id, hook)
    with transaction.atomic():
        _check_limits(account_id, hook, limits)
        stored = ScheduledHook.objects.create(
            account_id=account_id,
            name=hook.name,
            cron=hook.cron,
            timezone=hook.timezone,
            action=hook.action,
            config=hook.config,
            created_by_id=created_by_id,
        )
        stored.schedule = schedule_create(
            name=_schedule_name(stored.pk),
            cron=hook.cron,
            timezone=hook.timezone,
            handler=HOOK_HANDLER,
            payload={"hook": stored.pk},
            queue=settings.WORKFLOW_QUEUE,
        )
        stored.save(update_fields=["schedule"])
    return stored


def _check_references(account_id: int, hook: HookDefinition) -> None:
    workflows = Workflow.objects.filter(account_id=account_id)
    if hook.action is HookAction.START_WORKFLOW and not workflows.filter(pk=hook.config["workflow"]).exists():
        raise InvalidHook([FieldError("action.workflow", "is not a workflow of this account")])


def _check_limits(account_id: int, hook: HookDefinition, limits: HookLimits) -> None:
    """The account's count of hooks, and the contacts a tick would act on now. The account's row is locked
    first, so two creates at once cannot both take the last place."""
    account_lock(account_id=account_id)
    problems: list[FieldError] = []
    if too_many := limits.count_problem(ScheduledHook.objects.filter(account_id=account_id).count()):
        problems.append(FieldError("", too_many))
    if hook.action is not HookAction.DELIVER_WEBHOOK:
        matching = _matching_contacts(account_id, list(hook.conditions), stop_after=limits.max_contacts_per_tick)
        if too_wide := limits.contacts_problem(len(matching)):
            problems.append(FieldError("action.filter", too_wide))
    if problems:
        raise InvalidHook(problems)


def _locked(account_id: int, hook_id: int) -> ScheduledHook:
    hook = ScheduledHook.objects.select_for_update().filter(account_id=account_id, pk=hook_id).first()
    if hook is None:
        raise HookNotFound(hook_id)
    return hook


@transaction.atomic
def hook_pause(*, account_id: int, hook_id: int) -> ScheduledHook:
    """No tick fires while paused (pausing again changes nothing)."""
    hook = _locked(account_id, hook_id)
    if hook.status != HookStatus.PAUSED:
        hook.status = HookStatus.PAUSED
        hook.save(update_fields=["status", "updated_at"])
        schedule_pause(schedule_id=hook.schedule_id)
    return hook_get(account_id=account_id, hook_id=hook_id)


@transaction.atomic
def hook_resume(*, account_id: int, hook_id: int) -> ScheduledHook:
    """Ticks fire again from the next one; the ticks that passed while paused are not made up."""
    hook = _locked(account_id, hook_id)
    if hook.status != HookStatus.ACTIVE:
        hook.status = HookStatus.ACTIVE
        hook.save(update_fields=["status", "updated_at"])
        schedule_resume(schedule_id=hook.schedule_id)
    return hook_get(account_id=account_id, hook_id=hook_id)


@transaction.atomic
def hook_delete(*, account_id: int, hook_id: int) -> None:
    """The hook, its schedule and its run records; what its ticks started goes on."""
    hook = _locked(account_id, hook_id)
    schedule_delete(schedule_id=hook.schedule_id)
    hook.delete()


# --- a tick -------------------------------------------------------------------------------------------------


def _conditions(config: dict[str, Any]) -> list[ContactCondition]:
    reader = Reader({"filter": config.get("filter") or []}, "action", ValidationContext(lambda t: None, frozenset()))
    return parse_contact_filter(reader)


def _matching_contacts(account_id: int, conditions: list[ContactCondition], *, stop_after: int = 0) -> list[int]:
    """The ids of the account's contacts the filter matches; with `stop_after`, at most one more than that
    (enough to tell that there are too many)."""
    found: list[int] = []
    for row in contact_rows(account_id=account_id, columns=CONTACT_COLUMNS):
        if contact_matches(conditions, row):
            found.append(row["id"])
            if 0 < stop_after < len(found):
                break
    return found


def run_hook(
    *, hook_id: int, tick: datetime, missed_ticks: int = 0, job_id: UUID | None = None
) -> ScheduledHookRun | None:
    """Do what the hook does for this tick, once. A refusal by the engine (the workflow paused, the account at its
    run limit) is recorded as a failed run and the next tick tries again; a database error propagates (the
    queue retries the job)."""
    hook = ScheduledHook.objects.filter(pk=hook_id).first()
    if hook is None:  # deleted since the tick was queued (or its account was)
        schedule_delete(name=_schedule_name(hook_id))
        return None
    if hook.status != HookStatus.ACTIVE:
        return None
    done = ScheduledHookRun.objects.filter(hook=hook, tick=tick).first()
    if done is not None:
        return done  # a retried job: this tick already ran
    record = {"hook": hook, "tick": tick, "missed_ticks": missed_ticks, "job_id": job_id}
    status = HookRunStatus.DELIVERING if hook.action == HookAction.DELIVER_WEBHOOK else HookRunStatus.SUCCEEDED
    try:
        with transaction.atomic():
            started, skipped, detail = _act(hook, tick)
            return ScheduledHookRun.objects.create(
                **record, status=status, started=started, skipped=skipped, detail=detail
            )
    except IntegrityError:
        return ScheduledHookRun.objects.filter(hook=hook, tick=tick).first()  # another attempt recorded it
    except Exception as exc:
        if is_database_error(exc) or not isinstance(exc, WorkflowDomainError):
            raise
        log.warning("scheduled hook %s tick %s refused: %s", hook.pk, tick.isoformat(), format_error(exc))
        return ScheduledHookRun.objects.create(**record, status=HookRunStatus.FAILED, error=format_error(exc))


def _act(hook: ScheduledHook, tick: datetime) -> tuple[int, int, dict[str, Any]]:
    config = hook.config
    scheduled = {"scheduled_for": tick.isoformat(), "hook": hook.pk}
    if hook.action == HookAction.DELIVER_WEBHOOK:
        # The delivery reads the hook's URL and headers when it runs: its payload carries no secret.
        job = enqueue(
            DELIVERY_HANDLER,
            {"hook": hook.pk, "scheduled_for": tick.isoformat()},
            account=hook.account_id,
            unique_key=f"hook:{hook.pk}:{tick.isoformat()}",
        )
        return 1, 0, {"webhook_job": str(job.pk)}
    limits = hook_limits()
    contacts = _matching_contacts(hook.account_id, _conditions(config), stop_after=limits.max_contacts_per_tick)
    if too_wide := limits.contacts_problem(len(contacts)):
        raise InvalidHook([FieldError("action.filter", too_wide)])  # recorded as a failed tick; nothing is done
    data = {**(config.get("data") or {}), **scheduled}
    if hook.action == HookAction.POST_EVENT:
        started: list[str] = []
        for contact_id in contacts:
            outcome = record_event(account=hook.account_id, contact=contact_id, name=config["event"], data=data)
            started.extend(str(run.pk) for run in outcome.started)
        return len(contacts), 0, {"contacts": len(contacts), "execution_ids": started[:KEPT_IDS], "runs": len(started)}
    ids: list[str] = []
    skipped = 0
    for start in range(0, len(contacts), START_CHUNK):
        bulk = start_runs(
            workflow_id=config["workflow"],
            contact_ids=contacts[start : start + START_CHUNK],
            account_id=hook.account_id,
            trigger_data=data,
            source=TriggerSource.SCHEDULE,
        )
        ids.extend(str(execution_id) for execution_id in bulk.execution_ids)
        skipped += len(bulk.skipped)
    return len(ids), skipped, {"execution_ids": ids[:KEPT_IDS]}


def deliver_hook_webhook(*, hook_id: int, tick: datetime, job_id: UUID) -> ScheduledHookRun | None:
    """One attempt of a deliver_webhook tick's webhook, and its outcome on the tick's record.

    A 2xx settles it as succeeded (status code and timing in `detail`); a target the SSRF guard refuses (the
    name resolving elsewhere since the hook was saved) as refused; any other failure is raised for the queue
    to retry as it retries a webhook step, the latest attempt's error shown meanwhile, and `hook_delivery_ended`
    settles it as failed when the queue gives up. The `webhook-id` is the job's: the same on every retry.
    """
    run = ScheduledHookRun.objects.select_related("hook").filter(hook_id=hook_id, tick=tick).first()
    if run is None:
        return None  # the hook was deleted (its records with it): nothing to deliver for
    if run.status == HookRunStatus.SUCCEEDED:
        return run  # delivered already (the job ran again after it recorded its outcome)
    # DELIVERING, or FAILED/REFUSED and an operator retried the job: deliver (again)
    config = run.hook.config
    try:
        response = webhook_client().send(
            WebhookRequest(
                method=str(config.get("method") or "POST"),
                url=str(config.get("url") or ""),
                headers=dict(config.get("headers") or {}),
                body=config.get("body"),
                message_id=f"job_{job_id}",
                account_id=run.hook.account_id,
            )
        )
    except JobError as exc:
        refused = bool(failure_details(exc).get("refused"))
        status = HookRunStatus.REFUSED if refused else HookRunStatus.DELIVERING  # DELIVERING: the queue decides
        _settle(run, status, format_error(exc), {}, unless=[HookRunStatus.SUCCEEDED])
        raise
    outcome = {"status_code": response.status_code, "duration_ms": round(response.duration_ms, 1)}
    _settle(run, HookRunStatus.SUCCEEDED, "", {**outcome, "webhook_id": response.message_id})
    return ScheduledHookRun.objects.get(pk=run.pk)


def hook_delivery_ended(*, hook_id: int, tick: datetime, error: str) -> None:
    """The queue gave up on a tick's delivery (retries spent, or a permanent failure): the tick failed,
    unless its last attempt already said why more exactly (refused)."""
    run = ScheduledHookRun.objects.filter(hook_id=hook_id, tick=tick).first()
    if run is not None:
        _settle(run, HookRunStatus.FAILED, error, {}, unless=[HookRunStatus.SUCCEEDED, HookRunStatus.REFUSED])


def _settle(
    run: ScheduledHookRun,
    status: HookRunStatus,
    error: str,
    detail: dict[str, Any],
    *,
    unless: list[HookRunStatus] | None = None,
) -> None:
    """Record where a tick's delivery stands, in one conditional UPDATE: a record in one of the `unless`
    states stays as it is (by default a delivered one)."""
    ScheduledHookRun.objects.filter(pk=run.pk).exclude(status__in=unless or [HookRunStatus.SUCCEEDED]).update(
        status=status, error=error, detail={**run.detail, **detail}
    )


def hook_runs_purge(*, older_than_days: float, chunk: int = 5000) -> int:
    """Forget the records of ticks older than this (what they started lives on as runs); a per-minute hook
    writes half a million a year otherwise."""
    if older_than_days <= 0:
        return 0
    cutoff = database_now() - timedelta(days=older_than_days)
    deleted = 0
    while True:
        ids = list(ScheduledHookRun.objects.filter(tick__lt=cutoff).values_list("pk", flat=True)[:chunk])
        if not ids:
            return deleted
        deleted += ScheduledHookRun.objects.filter(pk__in=ids).delete()[0]
