"""Workflow, version, run and event bodies: one serializer per direction.

Workflow bodies are checked by the workflow service, not here: it reports
every problem of a draft at once, each by its path (`trigger.event`,
`steps[2].config.url`), so the input serializers only refuse unknown
top-level fields and describe the shapes for the schema. Step configs in
responses go through `redaction`: webhook credentials are never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from api.converters import ID_SCHEMA
from api.serializers import CHECKED, NOT_BLANK, StrictSerializer
from workflows.api.shapes import CONDITION_OP_CHOICES, CONDITION_SCHEMA, config_schemas
from workflows.application.selectors import has_unpublished_changes
from workflows.domain.actions import MAX_STEP_NAME, MAX_STEPS
from workflows.domain.execution import ExecutionStatus, StepOutcome, run_path
from workflows.domain.redaction import shown_steps
from workflows.domain.step_types import step_type_names
from workflows.domain.triggers import (
    BUILTIN_EVENTS,
    EVENT_NAME,
    MAX_CONDITIONS,
    UNTRIGGERABLE_EVENTS,
    Reenrollment,
    TriggerType,
)
from workflows.domain.workflow import WorkflowStatus
from workflows.infrastructure.models import ExecutionLog, Workflow, WorkflowExecution, WorkflowVersion

# Named enums in the schema (SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]): several fields are called `status`.
WORKFLOW_STATUS_CHOICES = [s.value for s in WorkflowStatus]
EXECUTION_STATUS_CHOICES = [s.value for s in ExecutionStatus]
TRIGGER_TYPE_CHOICES = [t.value for t in TriggerType]
REENROLLMENT_CHOICES = [r.value for r in Reenrollment]
ACTION_TYPE_CHOICES = list(step_type_names())
STEP_OUTCOME_CHOICES = [o.value for o in StepOutcome]

STATUS_HINT = (
    "status changes through POST /api/v1/workflows/{id}/publish, /pause, /activate, /restore and DELETE (archive)"
)
EVENT_NAME_RULE = "an event name is letters, digits and . _ : - (at most 100), e.g. order.paid"

# --- Shapes, for the schema (the workflow service checks them) -----------------------------------

TRIGGER_SCHEMA = {
    "type": "object",
    "description": "Who enters: manual (started by a person or an API client), api, or event.",
    "properties": {
        "type": {"type": "string", "enum": TRIGGER_TYPE_CHOICES, "default": "manual"},
        "event": {
            "type": "string",
            "maxLength": 100,
            "description": f"For event triggers: {', '.join(BUILTIN_EVENTS)} or a custom name sent to /events.",
            CHECKED: "required by an event trigger, refused by the others; a custom event must be declared",
        },
        "tag": {
            "type": "string",
            "description": "For tag.added / tag.removed: only this tag (blank: any).",
            CHECKED: "only with the tag.added and tag.removed events; a tag as contacts take it",
        },
        "filter": {
            "type": "array",
            "maxItems": MAX_CONDITIONS,
            "items": CONDITION_SCHEMA,
            "description": "Conditions on the contact at the time of the event; all must hold.",
        },
    },
    "additionalProperties": False,
}
STEP_SCHEMA = {
    "type": "object",
    "properties": {
        "key": {
            "type": "string",
            "pattern": "^[a-z0-9_]{1,64}$",
            "description": "Stable and unique in the workflow; `next` and the configs name steps by it. "
            "Generated as step_<n> (its 1-based position) when missing.",
        },
        "name": {"type": "string", "maxLength": MAX_STEP_NAME},
        "action_type": {"type": "string", "enum": ACTION_TYPE_CHOICES},
        "config": {
            "description": "The action's settings, e.g. send_email {subject, text, html}, webhook {url, method, "
            "headers, body}, wait {duration | until}, add_tag {tag}, branch, split, wait_for_event, end (below); "
            "any step may set max_attempts and base_delay. Checked when saved: every problem is named by its "
            "path, e.g. steps[2].config.url or steps[0].config.branches[1].next.",
            "anyOf": [
                *config_schemas(),  # each step type's own (its folder's schema.py), where it has one
                {"title": "other actions", "type": "object", "additionalProperties": True},
            ],
        },
        "next": {
            "type": "string",
            "nullable": True,
            "pattern": "^([a-z0-9_]{1,64}|\\$end)$",
            "description": 'The key of the step that follows, or "$end"; missing: the following step in order '
            "(after the last, the run completes). branch, split and end steps choose in their config instead.",
        },
        "position": {"description": "Accepted and ignored: the order of the list decides."},
    },
    "required": ["action_type"],
    "additionalProperties": False,
}


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": 200, "pattern": NOT_BLANK})
class NameField(serializers.JSONField):
    pass


GOAL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 100, "description": "Shown in the run's end reason: goal met: <name>."},
        "conditions": {
            "type": "array",
            "items": CONDITION_SCHEMA,
            "description": 'All must hold, e.g. [{"field": "tags", "op": "contains", "value": "customer"}] or '
            '[{"field": "event.name", "op": "equals", "value": "order.paid"}]: over the contact, trigger.<path> and '
            "event.<path> (the event being judged).",
        },
        "then": {
            "type": "string",
            "pattern": "^([a-z0-9_]{1,64}|\\$end)$",
            "description": '"$end" (default: the run completes) or the key of a step to go to.',
        },
    },
    "required": ["name", "conditions"],
    "additionalProperties": False,
}


@extend_schema_field(
    {
        "type": "array",
        "items": GOAL_SCHEMA,
        "description": "When an event makes an enrolled contact meet a goal, its run ends COMPLETED (reason "
        "'goal met: <name>') wherever it is, or goes to the step `then` names. The first goal met wins.",
        CHECKED: "conditions in the condition language; `then` names a step of the workflow",
    }
)
class GoalsField(serializers.JSONField):
    pass


@extend_schema_field({"type": "boolean", "nullable": True})
class TrackingField(serializers.JSONField):
    """true, false, or null: the account's setting (Account.track_email_engagement)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, **kwargs)


@extend_schema_field({"type": "string", "maxLength": 5000})
class DescriptionField(serializers.JSONField):
    pass


@extend_schema_field(TRIGGER_SCHEMA)
class TriggerField(serializers.JSONField):
    pass


@extend_schema_field({"type": "string", "enum": REENROLLMENT_CHOICES})
class ReenrollmentField(serializers.JSONField):
    pass


@extend_schema_field(
    {
        "type": "array",
        "maxItems": MAX_STEPS,
        "items": STEP_SCHEMA,
        CHECKED: "the step graph (every next exists, every step is reachable and can end, a loop passes a wait) "
        "and each action's settings (templates, URLs through the SSRF guard, tags, durations)",
    }
)
class StepsField(serializers.JSONField):
    pass


# --- Workflows in ---------------------------------------------------------------------------------


class _WorkflowIn(StrictSerializer):
    """Passed to the workflow service as given: it checks everything and names every problem by its path."""

    unknown_field_hints = {
        "status": STATUS_HINT,
        "current_version": "changes when the draft is published: POST /api/v1/workflows/{id}/publish",
    }

    def parts(self) -> dict[str, Any]:
        return dict(self.validated_data)


@extend_schema_serializer(component_name="WorkflowCreate")
class WorkflowCreateIn(_WorkflowIn):
    name = NameField()
    description = DescriptionField(required=False)
    trigger = TriggerField(required=False, help_text="Default: manual.")
    reenrollment = ReenrollmentField(required=False, help_text="Default: never (a contact enters once).")
    steps = StepsField(required=False, help_text="In order. A draft may have none; publishing needs one.")
    goals = GoalsField(required=False)
    track_email_engagement = TrackingField(
        required=False, help_text="Track opens and clicks of this workflow's email; null (default): the account's."
    )

    def to_internal_value(self, data):
        # A missing name is reported by the workflow service together with every other problem, in one answer.
        if isinstance(data, Mapping) and "name" not in data:
            data = {**data, "name": ""}
        return super().to_internal_value(data)


@extend_schema_serializer(component_name="WorkflowChange")
class WorkflowChangeIn(_WorkflowIn):
    """PATCH: only the parts given change; `steps`, when given, replaces the draft's steps."""

    name = NameField(required=False)
    description = DescriptionField(required=False)
    trigger = TriggerField(required=False)
    reenrollment = ReenrollmentField(required=False)
    steps = StepsField(required=False)
    goals = GoalsField(required=False)
    track_email_engagement = TrackingField(required=False)


@extend_schema_serializer(component_name="WorkflowReplace")
class WorkflowReplaceIn(_WorkflowIn):
    """PUT: the whole draft; every part is required (an omitted one would be wiped)."""

    name = NameField()
    description = DescriptionField()
    trigger = TriggerField()
    reenrollment = ReenrollmentField()
    steps = StepsField()
    goals = GoalsField(required=False, help_text="Omitted: unchanged.")
    track_email_engagement = TrackingField(required=False, help_text="Omitted: unchanged.")


# --- Workflows out --------------------------------------------------------------------------------


class ConditionOut(serializers.Serializer):
    field = serializers.CharField()
    op = serializers.ChoiceField(choices=CONDITION_OP_CHOICES)
    value = serializers.JSONField(allow_null=True)


@extend_schema_serializer(component_name="Trigger")
class TriggerOut(serializers.Serializer):
    type = serializers.ChoiceField(choices=TRIGGER_TYPE_CHOICES)
    event = serializers.CharField(allow_blank=True, help_text="For event triggers; else empty.")
    tag = serializers.CharField(allow_blank=True, help_text="For tag.added / tag.removed: only this tag; else empty.")
    filter = ConditionOut(many=True)


@extend_schema_serializer(component_name="Step")
class StepOut(serializers.Serializer):
    name = serializers.CharField(allow_blank=True)
    action_type = serializers.ChoiceField(choices=ACTION_TYPE_CHOICES)
    config = serializers.DictField(
        help_text="Webhook credentials are never shown: the URL is cut to scheme and host, header values other than "
        "Content-Type/Accept/User-Agent and secret-looking body values read `[redacted]`. Sent back unchanged, "
        "they keep the stored values."
    )


@extend_schema_serializer(component_name="VersionSummary")
class VersionSummaryOut(serializers.ModelSerializer):
    published_at = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WorkflowVersion
        fields = ["id", "number", "published_at"]
        read_only_fields = fields


def _steps_of(workflow: Workflow) -> list[dict[str, Any]]:
    return shown_steps([step.as_dict() for step in workflow.steps.all()])


@extend_schema_serializer(component_name="WorkflowSummary")
class WorkflowSummaryOut(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=WORKFLOW_STATUS_CHOICES)
    trigger = TriggerOut(source="trigger_dict")
    reenrollment = serializers.ChoiceField(choices=REENROLLMENT_CHOICES)
    step_count = serializers.IntegerField(help_text="Steps of the draft.")
    current_version = VersionSummaryOut(allow_null=True, help_text="What new runs start on; null: never published.")

    class Meta:
        model = Workflow
        fields = [
            "id",
            "name",
            "description",
            "status",
            "trigger",
            "reenrollment",
            "step_count",
            "current_version",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="Workflow")
class WorkflowOut(WorkflowSummaryOut):
    steps = serializers.SerializerMethodField(help_text="The draft's steps, in order.")
    has_unpublished_changes = serializers.SerializerMethodField(
        help_text="True when the draft differs from the current version (or it was never published)."
    )
    # The summary's count of the current version, here the draft's: a field may be redeclared, the stubs say no.
    step_count = serializers.SerializerMethodField(help_text="Steps of the draft.")  # type: ignore[assignment]

    class Meta(WorkflowSummaryOut.Meta):
        fields = [
            *WorkflowSummaryOut.Meta.fields,
            "steps",
            "goals",
            "track_email_engagement",
            "has_unpublished_changes",
        ]
        read_only_fields = fields

    @extend_schema_field(StepOut(many=True))
    def get_steps(self, workflow: Workflow) -> list[dict[str, Any]]:
        return _steps_of(workflow)

    def get_has_unpublished_changes(self, workflow: Workflow) -> bool:
        return has_unpublished_changes(workflow)

    def get_step_count(self, workflow: Workflow) -> int:
        return len(workflow.steps.all())


@extend_schema_serializer(component_name="WorkflowVersion")
class WorkflowVersionOut(serializers.ModelSerializer):
    """A published version: frozen, what runs started on it carry out."""

    workflow = serializers.IntegerField(source="workflow_id")
    trigger = TriggerOut(source="trigger_dict")
    reenrollment = serializers.ChoiceField(choices=REENROLLMENT_CHOICES)
    steps = serializers.SerializerMethodField()
    published_at = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WorkflowVersion
        fields = ["id", "number", "workflow", "trigger", "reenrollment", "steps", "goals", "published_at"]
        read_only_fields = fields

    @extend_schema_field(StepOut(many=True))
    def get_steps(self, version: WorkflowVersion) -> list[dict[str, Any]]:
        return shown_steps(version.steps)


# --- Runs -----------------------------------------------------------------------------------------


@extend_schema_field({"type": "string", "nullable": True})
class BlankAsNull(serializers.CharField):
    """Stored as "" when there is nothing; answered as null."""

    def __init__(self, **kwargs):
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: str):
        return value or None


@extend_schema_serializer(component_name="ExecutionStart")
class ExecutionStartIn(StrictSerializer):
    contact = serializers.IntegerField(
        min_value=1, max_value=ID_SCHEMA["maximum"], help_text="A contact of your account."
    )
    # A body field named `data`, as the API documents it; on the class it shadows Serializer.data (the stubs say no).
    data = serializers.DictField(  # type: ignore[assignment]
        required=False, help_text="Any JSON object (at most 64 KB): the run's trigger data, `{{ trigger.* }}`."
    )


@extend_schema_serializer(component_name="Execution")
class ExecutionOut(serializers.ModelSerializer):
    workflow_name = serializers.CharField(source="workflow.name")
    version = serializers.IntegerField(source="version.number", help_text="The workflow version the run carries out.")
    status = serializers.ChoiceField(choices=EXECUTION_STATUS_CHOICES)
    trigger_source = serializers.CharField(help_text="How it started: manual (admin), api or event.")
    trigger_event = BlankAsNull(help_text="The event that started it, or null.")
    trigger_data = serializers.SerializerMethodField(help_text="The data it was started with.")
    paused_from = BlankAsNull(help_text="While paused: the state it was paused in.")
    last_error = BlankAsNull(help_text="The latest step error, `Type: message` (redacted), or null.")
    last_error_category = BlankAsNull()
    current_step_key = BlankAsNull(help_text="The key of the step the run is at; null once its steps are done.")
    end_reason = BlankAsNull(help_text='Why it completed early: "ended by step", "goal met: <name>"; else null.')
    path = serializers.SerializerMethodField(help_text="The keys of the steps the run went through, in order.")

    class Meta:
        model = WorkflowExecution
        fields = [
            "id",
            "workflow",
            "workflow_name",
            "version",
            "contact",
            "status",
            "current_step_index",
            "current_step_key",
            "path",
            "end_reason",
            "step_count",
            "retry_count",
            "trigger_source",
            "trigger_event",
            "trigger_data",
            "resume_at",
            "paused_from",
            "last_error",
            "last_error_category",
            "parent",
            "depth",
            "created_at",
            "started_at",
            "completed_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_trigger_data(self, run: WorkflowExecution) -> dict[str, Any]:
        trigger = (run.context or {}).get("trigger")
        return trigger if isinstance(trigger, dict) else {}

    @extend_schema_field({"type": "array", "items": {"type": "string"}})
    def get_path(self, run: WorkflowExecution) -> list[str]:
        return run_path(run.context, run.current_step_index, run.step_count, run.current_step_key)


@extend_schema_serializer(component_name="ExecutionLog")
class ExecutionLogOut(serializers.ModelSerializer):
    """One attempt of one step. Error details and response data are bounded and redacted when recorded."""

    outcome = serializers.ChoiceField(choices=STEP_OUTCOME_CHOICES)
    action_type = serializers.ChoiceField(choices=ACTION_TYPE_CHOICES)
    error_category = BlankAsNull()
    error_details = BlankAsNull(help_text="`Type: message`, URLs cut to scheme and host, at most 1,000 characters.")
    response_data = serializers.DictField(help_text="What came back (at most 8 KB, URLs cut to scheme and host).")
    decision = serializers.DictField(
        help_text='What a deciding step chose and why, e.g. {"kind": "branch", "branch": "Clicked", "values": '
        '{"steps.welcome.clicked": true}, "next": "tag_engaged"} or {"kind": "split", "bucket": 37, "path": "A"}; '
        "{} for other steps."
    )

    class Meta:
        model = ExecutionLog
        fields = [
            "id",
            "step_index",
            "step_key",
            "step_name",
            "action_type",
            "attempt_number",
            "outcome",
            "started_at",
            "duration_ms",
            "error_category",
            "error_details",
            "response_data",
            "decision",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="ExecutionDetail")
class ExecutionDetailOut(ExecutionOut):
    logs = ExecutionLogOut(many=True, source="latest_logs", help_text="The latest attempts, oldest first.")
    log_count = serializers.IntegerField(help_text="All of the run's log rows.")
    logs_truncated = serializers.SerializerMethodField(
        help_text="True when `logs` holds only the latest rows; GET /executions/{id}/logs has them all."
    )

    class Meta(ExecutionOut.Meta):
        fields = [*ExecutionOut.Meta.fields, "logs", "log_count", "logs_truncated"]
        read_only_fields = fields

    def get_logs_truncated(self, run: WorkflowExecution) -> bool:
        return run.log_count > len(run.latest_logs)


# --- Events ---------------------------------------------------------------------------------------


# A custom event's name: Relay's own events happen when the contact changes, and cannot be posted.
CUSTOM_EVENT_SCHEMA = {
    "type": "string",
    "pattern": f"^{EVENT_NAME.pattern}$",
    "not": {"enum": sorted({*BUILTIN_EVENTS, *UNTRIGGERABLE_EVENTS})},
}


@extend_schema_field(CUSTOM_EVENT_SCHEMA)
class CustomEventField(serializers.CharField):
    pass


@extend_schema_serializer(component_name="Event")
class EventIn(StrictSerializer):
    name = CustomEventField(max_length=100, help_text="Your event's name, e.g. order.paid.")
    contact = serializers.IntegerField(
        min_value=1, max_value=ID_SCHEMA["maximum"], help_text="A contact of your account."
    )
    # A body field named `data`, as the API documents it; on the class it shadows Serializer.data (the stubs say no).
    data = serializers.DictField(  # type: ignore[assignment]
        required=False, help_text="Any JSON object (at most 64 KB): each run's trigger data, `{{ trigger.* }}`."
    )

    def validate_name(self, name: str) -> str:
        if name in BUILTIN_EVENTS or name in UNTRIGGERABLE_EVENTS:
            raise serializers.ValidationError(
                f"{name} is published by Relay itself (when a contact changes, an email is opened or clicked, "
                "an SMS is answered); change the contact (or its tags) through /api/v1/contacts instead"
            )
        if not EVENT_NAME.fullmatch(name):
            raise serializers.ValidationError(EVENT_NAME_RULE)
        return name


class SkippedOut(serializers.Serializer):
    workflow = serializers.IntegerField(source="workflow_id")
    reason = serializers.CharField()


@extend_schema_serializer(component_name="EventOutcome")
class EventOutcomeOut(serializers.Serializer):
    started = ExecutionOut(many=True, help_text="The runs this event started.")
    skipped = SkippedOut(
        many=True, help_text="Workflows the event matched that did not start, and why (filter, re-enrollment, limit)."
    )
