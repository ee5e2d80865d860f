"""/api/v1/schedules: an account's scheduled hooks, and the runs each tick started. Thin: the services in
workflows.application.scheduled_hooks validate and act; a webhook's URL and secrets are shown redacted as a
webhook step's are (workflows.domain.redaction)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.domain.roles import Permission
from api.converters import ID_SCHEMA
from api.filters import Choice, FilterSet
from api.serializers import CHECKED, NOT_BLANK, StrictSerializer
from api.views import AccountView, no_content
from workflows.api.serializers import CONDITION_SCHEMA, CUSTOM_EVENT_SCHEMA
from workflows.api.views import WORKFLOW_ERRORS
from workflows.application.scheduled_hooks import (
    hook_create,
    hook_delete,
    hook_get,
    hook_list,
    hook_pause,
    hook_resume,
    hook_runs,
)
from workflows.domain.redaction import shown_header, shown_json, shown_url
from workflows.domain.scheduled_hooks import HookAction, HookStatus
from workflows.domain.triggers import MAX_CONDITIONS
from workflows.infrastructure.models import ScheduledHook, ScheduledHookRun

HOOK_STATUS_CHOICES = [s.value for s in HookStatus]


# --- What a hook's fields take, for the schema (the service checks them: workflows.domain.scheduled_hooks) ---

_FILTER = {
    "type": "array",
    "maxItems": MAX_CONDITIONS,
    "items": CONDITION_SCHEMA,
    "description": "Conditions on the contact; all must hold. Empty: every contact of the account.",
    CHECKED: "at most SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK (10,000) contacts may match",
}
_DATA = {"type": "object", "description": "Any JSON object (at most 64 KB): each run's or event's data."}
_ACTION_SCHEMA = {
    "description": "What each tick does: start a workflow for each contact matching `filter`, post an event for "
    "each, or deliver one signed webhook.",
    "oneOf": [
        {
            "title": "start_workflow",
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": [HookAction.START_WORKFLOW.value]},
                "workflow": {**ID_SCHEMA, "description": "A workflow of this account."},
                "filter": _FILTER,
                "data": _DATA,
            },
            "required": ["type", "workflow"],
            "additionalProperties": False,
        },
        {
            "title": "post_event",
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": [HookAction.POST_EVENT.value]},
                "event": CUSTOM_EVENT_SCHEMA,
                "filter": _FILTER,
                "data": _DATA,
            },
            "required": ["type", "event"],
            "additionalProperties": False,
        },
        {
            "title": "deliver_webhook",
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": [HookAction.DELIVER_WEBHOOK.value]},
                "url": {
                    "type": "string",
                    "maxLength": 2048,
                    "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://",
                    CHECKED: "the SSRF guard's: an address on the public internet (or in WEBHOOK_ALLOWED_HOSTS)",
                },
                "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]},
                "headers": {
                    "type": "object",
                    "maxProperties": 50,
                    "additionalProperties": {"type": "string", "maxLength": 4000},
                    # OpenAPI 3.0 has no propertyNames: the names' rule is in words.
                    CHECKED: "names are HTTP tokens of 1 to 100 characters, not Relay's own (host, content-length, "
                    "webhook-id, webhook-signature, ...); values are visible text on one line",
                },
                "body": {"description": "Any JSON value, sent as the request's body."},
            },
            "required": ["type", "url"],
            "additionalProperties": False,
        },
    ],
}


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 200, "pattern": NOT_BLANK})
class HookNameField(serializers.JSONField):
    pass


@extend_schema_field(
    {
        "type": "string",
        "format": "cron",
        "description": "Five-field cron expression (minute hour day month weekday), read in `timezone`.",
        CHECKED: "a cron expression that fires, ticks at least SCHEDULED_HOOK_MIN_INTERVAL_MINUTES (15) apart",
    }
)
class CronField(serializers.JSONField):
    pass


@extend_schema_field(
    {
        "type": "string",
        "format": "iana-time-zone",
        "description": "IANA time zone name, e.g. Europe/Paris; default UTC.",
        CHECKED: "a time zone of the IANA database",
    }
)
class TimeZoneField(serializers.JSONField):
    pass


@extend_schema_field(_ACTION_SCHEMA)
class ActionField(serializers.JSONField):
    pass


class HookIn(StrictSerializer):
    """Refuses unknown fields; every value is the service's to check, so all problems come in one answer."""

    schema_required = ("name", "cron", "action")

    @classmethod
    def schema_extra(cls, *, patch: bool) -> Mapping[str, object]:
        return {CHECKED: "an account has at most SCHEDULED_HOOK_MAX_PER_ACCOUNT (50) scheduled hooks"}

    name = HookNameField(required=False)
    cron = CronField(required=False)
    timezone = TimeZoneField(required=False)
    action = ActionField(required=False)


@extend_schema_field(OpenApiTypes.OBJECT)
class ShownActionField(serializers.Field):
    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, hook: ScheduledHook) -> dict[str, Any]:
        config = dict(hook.config)
        if hook.action == HookAction.DELIVER_WEBHOOK:
            config["url"] = shown_url(config.get("url") or "")
            config["headers"] = {k: shown_header(k, v) for k, v in (config.get("headers") or {}).items()}
            config["body"] = shown_json(config.get("body"))
        return {"type": hook.action, **config}


@extend_schema_serializer(component_name="ScheduledHook")
class HookOut(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=HOOK_STATUS_CHOICES, read_only=True)
    action = ShownActionField()
    next_run_at = serializers.SerializerMethodField(help_text="The next tick (null while paused).")
    last_run_at = serializers.DateTimeField(source="schedule.last_run_at", read_only=True, allow_null=True)
    missed_ticks = serializers.SerializerMethodField(
        help_text="Ticks that came due while no worker ran and were folded into the one fired on catch-up."
    )

    class Meta:
        model = ScheduledHook
        fields = ["id", "name", "cron", "timezone", "action", "status", "next_run_at", "last_run_at", "missed_ticks"]
        fields += ["created_at", "updated_at"]
        read_only_fields = fields

    def get_next_run_at(self, hook: ScheduledHook) -> str | None:
        if hook.status != HookStatus.ACTIVE or hook.schedule is None:
            return None
        return serializers.DateTimeField().to_representation(hook.schedule.next_run_at)

    def get_missed_ticks(self, hook: ScheduledHook) -> int:
        return hook.schedule.missed_ticks if hook.schedule is not None else 0


@extend_schema_serializer(component_name="ScheduledHookRun")
class HookRunOut(serializers.ModelSerializer):
    execution_ids = serializers.SerializerMethodField(help_text="The runs this tick started (the first 1,000).")
    error = serializers.SerializerMethodField()

    class Meta:
        model = ScheduledHookRun
        fields = ["id", "tick", "status", "missed_ticks", "started", "skipped", "execution_ids", "detail", "error"]
        fields += ["job_id", "created_at"]
        read_only_fields = fields

    def get_execution_ids(self, run: ScheduledHookRun) -> list[str]:
        return list(run.detail.get("execution_ids", []))

    def get_error(self, run: ScheduledHookRun) -> str | None:
        return run.error or None


class HookView(AccountView):
    write_permission = Permission.MANAGE_WORKFLOWS
    domain_errors = WORKFLOW_ERRORS


class HookListView(HookView):
    filters = FilterSet(Choice("status", HookStatus, "Only hooks in this state."))

    @extend_schema(operation_id="schedules_list", summary="The account's scheduled hooks", responses=HookOut(many=True))
    def get(self, request: Request) -> Response:
        status = self.parse_filters().get("status")
        return self.paginated(hook_list(account_id=self.account_id, status=status), HookOut)

    @extend_schema(
        operation_id="schedules_create",
        summary="Create a scheduled hook",
        description="At each tick of `cron` (in `timezone`): start a workflow for each contact matching a filter, "
        "post an event for each, or deliver one signed webhook. Every problem is named by its path.",
        request=HookIn,
        responses={201: HookOut},
    )
    def post(self, request: Request) -> Response:
        HookIn(data=request.data).is_valid(raise_exception=True)
        hook = hook_create(account_id=self.account_id, definition=dict(request.data), created_by_id=self.caller.user_id)
        hook = hook_get(account_id=self.account_id, hook_id=hook.pk)
        return Response(HookOut(hook).data, status=201, headers={"Location": f"/api/v1/schedules/{hook.pk}"})


class HookDetailView(HookView):
    @extend_schema(operation_id="schedules_read", summary="One scheduled hook", responses=HookOut)
    def get(self, request: Request, hook_id: int) -> Response:
        return Response(HookOut(hook_get(account_id=self.account_id, hook_id=hook_id)).data)

    @extend_schema(
        operation_id="schedules_delete",
        summary="Delete a scheduled hook",
        description="Its ticks stop; the runs its ticks started go on.",
        responses={204: None},
    )
    def delete(self, request: Request, hook_id: int) -> Response:
        hook_delete(account_id=self.account_id, hook_id=hook_id)
        return no_content()


class HookPauseView(HookView):
    @extend_schema(operation_id="schedules_pause", summary="Pause: no tick fires", request=None, responses=HookOut)
    def post(self, request: Request, hook_id: int) -> Response:
        return Response(HookOut(hook_pause(account_id=self.account_id, hook_id=hook_id)).data)


class HookResumeView(HookView):
    @extend_schema(
        operation_id="schedules_resume",
        summary="Resume from the next tick",
        description="Ticks that passed while paused are not made up.",
        request=None,
        responses=HookOut,
    )
    def post(self, request: Request, hook_id: int) -> Response:
        return Response(HookOut(hook_resume(account_id=self.account_id, hook_id=hook_id)).data)


class HookRunsView(HookView):
    @extend_schema(
        operation_id="schedules_runs", summary="What each tick did, newest first", responses=HookRunOut(many=True)
    )
    def get(self, request: Request, hook_id: int) -> Response:
        self.parse_filters()
        return self.paginated(hook_runs(account_id=self.account_id, hook_id=hook_id), HookRunOut)
