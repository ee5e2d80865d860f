"""Job rows for the API. Fields are listed one by one and the payload is never among them:
payloads may carry personal data and secrets, and no jobs response shows them (operators included)."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from jobs.domain.states import DEAD_LETTER_REASONS, DUE_STATES, JobStatus, dead_letter_reason
from jobs.infrastructure.models import Job
from kernel.failures import stored_error


@extend_schema_field(OpenApiTypes.DATETIME)
class NextAttemptField(serializers.Field):
    """When the next attempt is due: run_at while the job waits (pending or retrying), else null."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, allow_null=True, **kwargs)

    def to_representation(self, job: Job):
        return serializers.DateTimeField().to_representation(job.run_at) if job.status in DUE_STATES else None


@extend_schema_field({"type": "string", "nullable": True})
class LastErrorField(serializers.Field):
    """The latest stored error (`Type: message`, redacted, <= 1,000 chars), or null."""

    def __init__(self, **kwargs):
        super().__init__(source="error_message", read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: str):
        return stored_error(value) or None


@extend_schema_field({"type": "string", "enum": list(DEAD_LETTER_REASONS), "nullable": True})
class DeadLetterReasonField(serializers.Field):
    """Why a dead letter gave up: expired (never started before its deadline), attempts_exhausted or
    permanent; null for a job that is not a dead letter."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, allow_null=True, **kwargs)

    def to_representation(self, job: Job):
        return dead_letter_reason(job.status, job.error_message)


JOB_STATUS_CHOICES = [s.value for s in JobStatus]  # named JobStatusEnum in the schema (ENUM_NAME_OVERRIDES)


@extend_schema_serializer(component_name="Job")
class JobOut(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=JOB_STATUS_CHOICES, read_only=True)
    next_attempt_at = NextAttemptField(help_text="When the next attempt is due (pending or retrying), else null.")
    last_error = LastErrorField(help_text="The latest error, `Type: message`, or null.")
    dead_letter_reason = DeadLetterReasonField(
        help_text="For a dead or failed job: expired, attempts_exhausted or permanent; else null."
    )
    snoozes = serializers.IntegerField(
        read_only=True, help_text="How often its handler snoozed it: put back until later, never counted as an attempt."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "handler",
            "queue",
            "status",
            "priority",
            "attempt_number",
            "max_attempts",
            "next_attempt_at",
            "last_error",
            "created_at",
            "started_at",
            "completed_at",
            "failed_at",
            "expires_at",
            "dead_letter_reason",
            "snoozes",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="OperatorJob")
class OperatorJobOut(JobOut):
    account_slug: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        source="account", slug_field="slug", read_only=True, allow_null=True
    )
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)

    class Meta(JobOut.Meta):
        fields = [
            *JobOut.Meta.fields,
            "account",
            "account_slug",
            "run_at",
            "retry_delay_seconds",
            "lease_expires_at",
            "worker_id",
            "duration_seconds",
        ]
        read_only_fields = fields


@extend_schema_serializer(component_name="JobCounts")
class JobCountsOut(serializers.Serializer):
    pending = serializers.IntegerField()
    running = serializers.IntegerField()
    completed = serializers.IntegerField()
    retrying = serializers.IntegerField()
    failed = serializers.IntegerField()
    dead = serializers.IntegerField()
    cancelled = serializers.IntegerField()


@extend_schema_serializer(component_name="DeadLetterCounts")
class DeadLetterCountsOut(serializers.Serializer):
    expired = serializers.IntegerField(help_text="Dead: not started before its deadline (never ran).")
    attempts_exhausted = serializers.IntegerField(help_text="Dead: every allowed attempt failed or was lost.")
    permanent = serializers.IntegerField(help_text="Failed: an error retrying would not help.")


@extend_schema_serializer(component_name="RunCounts")
class RunCountsOut(serializers.Serializer):
    queued = serializers.IntegerField()
    active = serializers.IntegerField()
    paused = serializers.IntegerField()
    waiting = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()


@extend_schema_serializer(component_name="JobStats")
class JobStatsOut(serializers.Serializer):
    counts = JobCountsOut(help_text="Jobs per status.")
    # The same numbers as flat keys, as the queue's first API answered them (clients written against it).
    pending = serializers.IntegerField(source="counts.pending", help_text="= counts.pending")
    running = serializers.IntegerField(source="counts.running", help_text="= counts.running")
    completed = serializers.IntegerField(source="counts.completed", help_text="= counts.completed")
    failed = serializers.IntegerField(source="counts.failed", help_text="= counts.failed")
    retrying = serializers.IntegerField(source="counts.retrying", help_text="= counts.retrying")
    dead = serializers.IntegerField(source="counts.dead", help_text="= counts.dead")
    dead_letters = DeadLetterCountsOut(help_text="Dead and failed jobs by why they gave up.")
    runs = RunCountsOut(help_text="Workflow runs per status (of the account, with ?account=).")
    failure_rate = serializers.FloatField(
        allow_null=True, help_text="(failed + dead) / (completed + failed + dead); null before any job finished."
    )
    avg_duration_seconds = serializers.FloatField(allow_null=True, help_text="Of completed jobs; null if none.")
