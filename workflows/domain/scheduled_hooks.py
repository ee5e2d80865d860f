"""Scheduled hooks: at each tick of a cron expression (in a time zone), do one thing for an account.

Three actions:

    start_workflow   {"workflow": 12, "filter": [conditions], "data": {...}}
                     start the workflow for each of the account's contacts matching the filter (all if none)
    post_event       {"event": "weekly.digest", "filter": [conditions], "data": {...}}
                     record that event for each matching contact (what POST /events does for one)
    deliver_webhook  {"url": "https://...", "method": "POST", "headers": {...}, "body": {...}}
                     one signed, SSRF-guarded webhook (a `scheduled_hook.deliver` job), its URL vetted by
                     the same guard when the hook is saved

Validation reports every problem by its path (`cron`, `action.workflow`, `action.filter[0].op`) and is plain
Python; the cron and time-zone rules are the queue's, in the shared kernel (kernel.cron).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kernel.cron import InvalidCron, InvalidTimeZone, shortest_interval, validate_cron, validate_time_zone
from workflows.domain.errors import FieldError, WorkflowValidationError
from workflows.domain.triggers import (
    BUILTIN_EVENTS,
    EVENT_NAME,
    UNTRIGGERABLE_EVENTS,
    ContactCondition,
    parse_contact_filter,
)
from workflows.domain.validation import Reader, TargetCheck, ValidationContext
from workflows.steps.webhook.config import check_webhook_url, webhook_headers

MAX_DATA_BYTES = 64 * 1024


class HookAction(StrEnum):
    START_WORKFLOW = "start_workflow"
    POST_EVENT = "post_event"
    DELIVER_WEBHOOK = "deliver_webhook"


class HookStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"


class HookRunStatus(StrEnum):
    """What a tick did. A deliver_webhook tick is DELIVERING from the tick until its delivery ends: SUCCEEDED
    (the receiver answered 2xx), REFUSED (the SSRF guard refused the target: nothing was sent) or FAILED
    (the receiver refused it, or the retries ran out). The other actions are done within the tick."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELIVERING = "delivering"
    REFUSED = "refused"


@dataclass(frozen=True)
class HookDefinition:
    name: str
    cron: str
    timezone: str
    action: HookAction
    config: dict[str, Any]  # the action's settings, as validated
    conditions: tuple[ContactCondition, ...] = ()


@dataclass(frozen=True)
class HookLimits:
    """What one account's scheduled hooks may do (settings SCHEDULED_HOOK_*; 0 turns a limit off).

    A hook's ticks cost whatever its action costs times every tick: 300 every-minute hooks posting an event to
    every contact are 300 full scans and millions of events an hour. The count and the interval are judged
    when a hook is created (lowering one leaves existing hooks as they are: pause or delete them); the
    contacts a tick acts on are judged at save, with the contacts of now, and again at every tick.
    """

    max_hooks: int = 50
    min_interval_minutes: int = 15
    max_contacts_per_tick: int = 10_000

    def count_problem(self, existing: int) -> str | None:
        if self.max_hooks > 0 and existing >= self.max_hooks:
            return (
                f"this account has {existing:,} scheduled hooks, and may have at most {self.max_hooks:,} "
                "(SCHEDULED_HOOK_MAX_PER_ACCOUNT): delete one first"
            )
        return None

    def interval_problem(self, cron: str) -> str | None:
        closest = shortest_interval(cron).total_seconds() / 60
        if self.min_interval_minutes > 0 and closest < self.min_interval_minutes:
            return (
                f"fires {_minutes(closest)} apart at its closest; a scheduled hook may fire at most once every "
                f"{_minutes(self.min_interval_minutes)} (SCHEDULED_HOOK_MIN_INTERVAL_MINUTES)"
            )
        return None

    def contacts_problem(self, matching: int) -> str | None:
        """`matching`: the contacts counted, at most one past the limit (counting further would tell nothing)."""
        if self.max_contacts_per_tick > 0 and matching > self.max_contacts_per_tick:
            return (
                f"matches more than {self.max_contacts_per_tick:,} contacts, the most one tick may act on "
                "(SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK): narrow the filter"
            )
        return None


def _minutes(minutes: float) -> str:
    return "1 minute" if minutes == 1 else f"{minutes:g} minutes"


NO_LIMITS = HookLimits(max_hooks=0, min_interval_minutes=0, max_contacts_per_tick=0)


class InvalidHook(WorkflowValidationError):
    """A hook that cannot be accepted; every problem is listed by path (HTTP 400)."""


def _no_templates(check_webhook_target: TargetCheck | None = None) -> ValidationContext:
    """A hook fills in no templates (there is no contact to fill them from): its texts are sent as written."""
    return ValidationContext(
        check_template=lambda text: None, contact_fields=frozenset(), check_webhook_target=check_webhook_target
    )


def parse_hook(
    raw: Any, *, check_webhook_target: TargetCheck | None = None, limits: HookLimits = NO_LIMITS
) -> HookDefinition:
    """The hook described by `raw` (`{"name", "cron", "timezone", "action": {"type", ...}}`), or InvalidHook
    naming every problem. `check_webhook_target` is the SSRF guard's save-time question (the one a webhook
    step's URL is asked): a deliver_webhook hook to an address it refuses is refused naming `action.url`.
    A cron firing more often than `limits` allow is refused naming `cron`."""
    errors: list[FieldError] = []
    if not isinstance(raw, dict):
        raise InvalidHook([FieldError("", "must be an object")])
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        errors.append(FieldError("name", "is required: text of 1 to 200 characters"))
    cron, zone = "", "UTC"
    try:
        cron = validate_cron(raw.get("cron", ""))
        if too_often := limits.interval_problem(cron):
            errors.append(FieldError("cron", too_often))
    except InvalidCron as exc:
        errors.append(FieldError("cron", str(exc)))
    try:
        zone = validate_time_zone(raw.get("timezone", "UTC"))
    except InvalidTimeZone as exc:
        errors.append(FieldError("timezone", str(exc)))
    action, config, conditions = _parse_action(raw.get("action"), errors, check_webhook_target)
    for key in raw:
        if key not in ("name", "cron", "timezone", "action"):
            errors.append(FieldError(key, "is not a field of a scheduled hook"))
    if errors:
        raise InvalidHook(errors)
    return HookDefinition(str(name).strip(), cron, zone, action, config, tuple(conditions))


def _parse_action(
    raw: Any, errors: list[FieldError], check_webhook_target: TargetCheck | None
) -> tuple[HookAction, dict[str, Any], list[ContactCondition]]:
    if not isinstance(raw, dict):
        errors.append(FieldError("action", 'is required: an object with a "type"'))
        return HookAction.DELIVER_WEBHOOK, {}, []
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in {a.value for a in HookAction}:  # a list or object is unhashable
        errors.append(FieldError("action.type", f"must be one of: {', '.join(a.value for a in HookAction)}"))
        return HookAction.DELIVER_WEBHOOK, {}, []
    action = HookAction(kind)
    reader = Reader(raw, "action", _no_templates(check_webhook_target))
    reader.get("type")
    config: dict[str, Any] = {}
    conditions: list[ContactCondition] = []
    if action in (HookAction.START_WORKFLOW, HookAction.POST_EVENT):
        conditions = parse_contact_filter(reader)
        config["filter"] = raw.get("filter") or []
        data = raw.get("data", {})
        if not isinstance(data, dict):
            reader.error("action.data", "must be an object")
        elif len(json.dumps(data)) > MAX_DATA_BYTES:
            reader.error("action.data", f"must be at most {MAX_DATA_BYTES // 1024} KB as JSON")
        config["data"] = data if isinstance(data, dict) else {}
    if action is HookAction.START_WORKFLOW:
        workflow = raw.get("workflow")
        if isinstance(workflow, bool) or not isinstance(workflow, int) or workflow < 1:
            reader.error("action.workflow", "is required: the id of a workflow of this account")
        config["workflow"] = workflow
        allowed = ["type", "workflow", "filter", "data"]
    elif action is HookAction.POST_EVENT:
        event = raw.get("event")
        if not isinstance(event, str) or not EVENT_NAME.fullmatch(event):
            reader.error("action.event", "is required: letters, digits and . _ : - (at most 100)")
        elif event in (*BUILTIN_EVENTS, *UNTRIGGERABLE_EVENTS):
            reader.error("action.event", f"{event} is Relay's own: it happens when the contact changes")
        config["event"] = event
        allowed = ["type", "event", "filter", "data"]
    else:
        url = raw.get("url")
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")) or len(url) > 2048:
            reader.error("action.url", "is required: an http:// or https:// URL of at most 2,048 characters")
        else:
            check_webhook_url(reader, url)  # the webhook step's rule: the same guard, asked at save
        method = raw.get("method", "POST")
        if not isinstance(method, str) or method.upper() not in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
            reader.error("action.method", "must be one of GET, HEAD, POST, PUT, PATCH, DELETE")
        headers = raw.get("headers") or {}
        if not isinstance(headers, dict):
            reader.error("action.headers", "must map header names to text values")
        else:
            headers = dict(webhook_headers(reader))  # the step's rule: names, values, none of Relay's own
        body = raw.get("body")
        if body is not None:
            reader.check_json("action.body", body, max_bytes=MAX_DATA_BYTES)
        config.update(url=url, method=str(method).upper(), headers=headers, body=body)
        allowed = ["type", "url", "method", "headers", "body"]
    for key in raw:
        if key not in allowed:
            reader.error(f"action.{key}", f"is not a setting of {action.value} (settings: {', '.join(allowed)})")
    errors.extend(reader.errors)
    return action, config, conditions
