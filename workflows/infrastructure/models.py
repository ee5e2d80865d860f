"""The workflow engine's tables. `workflows.domain` holds the rules; these rows persist them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from integrations.domain.sending.problems import Problems
from integrations.domain.sending.settings import parse_workflow_rules
from jobs.public.storage import uuid7
from workflows.domain.errors import PublishedVersionImmutable
from workflows.domain.execution import COUNTED_FOR_LIMIT, ExecutionStatus, StepOutcome
from workflows.domain.scheduled_hooks import HookAction, HookRunStatus, HookStatus
from workflows.domain.triggers import Reenrollment, TriggerType
from workflows.domain.workflow import WorkflowStatus


def _choices(enum) -> list[tuple[str, str]]:
    return [(member.value, member.value.replace("_", " ")) for member in enum]


class TriggerSource(models.TextChoices):
    MANUAL = "manual", "manual (admin)"
    API = "api", "API"
    EVENT = "event", "event"
    SCHEDULE = "schedule", "scheduled hook"


def validate_workflow_sending_rules(value: object) -> None:
    """Every problem of a workflow's sending rules, each by its path."""
    problems = Problems()
    parse_workflow_rules(value, "sending_rules", problems)
    if problems:
        raise ValidationError([str(problem) for problem in problems])


class Workflow(models.Model):
    """A marketer's workflow. Its fields and steps are the draft; `current_version` is what runs."""

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="workflows")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=_choices(WorkflowStatus), default=WorkflowStatus.DRAFT)
    trigger_type = models.CharField(max_length=16, choices=_choices(TriggerType), default=TriggerType.MANUAL)
    trigger_event = models.CharField(
        max_length=100, blank=True, default="", help_text="For event triggers: contact.created, tag.added, ..."
    )
    trigger_tag = models.CharField(
        max_length=64, blank=True, default="", help_text="For tag.added / tag.removed: only this tag (blank: any)."
    )
    trigger_filter = models.JSONField(
        default=list,
        blank=True,
        help_text='Conditions on the contact, all must hold: [{"field": "tags", "op": "contains", "value": "vip"}]',
    )
    reenrollment = models.CharField(
        max_length=16,
        choices=_choices(Reenrollment),
        default=Reenrollment.NEVER,
        help_text="never: a contact enters once; after finish: again once its run ended; always: even during a run.",
    )
    current_version = models.ForeignKey(
        "WorkflowVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    # Met by an event, a goal ends the contact's run (or moves it to a step): [{"name", "conditions", "then"}].
    goals = models.JSONField(default=list, blank=True)
    # Opens and clicks of this workflow's email: None follows the account (Account.track_email_engagement).
    # Read when an email is sent, not frozen in the version: switching tracking off takes effect at once.
    track_email_engagement = models.BooleanField(
        null=True,
        blank=True,
        default=None,
        help_text="Track opens and clicks of this workflow's email. Blank: the account's setting.",
    )
    # Its sending rules over the account's (integrations.domain.sending.settings.parse_workflow_rules): purpose,
    # whether its transactional messages are exempt from the window, windows, caps, when_capped. Read when a
    # message is sent, not frozen in the version, like tracking: a rule tightened applies to the next message.
    sending_rules = models.JSONField(default=dict, blank=True, validators=[validate_workflow_sending_rules])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "workflows"
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["account", "status"], name="workflow_account_status")]

    def __str__(self) -> str:
        return self.name

    def trigger_dict(self) -> dict:
        return {
            "type": self.trigger_type,
            "event": self.trigger_event,
            "tag": self.trigger_tag,
            "filter": self.trigger_filter,
        }


class WorkflowStep(models.Model):
    """One step of a workflow's draft. Publishing copies the steps into a version."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField()
    # Stable in the workflow: `next` and the configs' paths name steps by key (generated `step_<n>`).
    key = models.CharField(max_length=64, default="")
    name = models.CharField(max_length=200, blank=True, default="")
    # A name of the step type registry (workflows/steps/registry.py): checked by the domain when saved, not by a
    # `choices` list, so a new step type is a folder and a registry line, no migration.
    action_type = models.CharField(max_length=32)
    config = models.JSONField(default=dict, blank=True)
    # The key of the step that follows, or "$end"; blank: the following step in order.
    next_key = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        app_label = "workflows"
        ordering = ["workflow", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "position"], name="workflow_step_position"),
            models.UniqueConstraint(fields=["workflow", "key"], name="workflow_step_key"),
        ]

    def __str__(self) -> str:
        return f"{self.position}. {self.name or self.action_type}"

    def as_dict(self) -> dict:
        """The step as the REST body and a version's JSON hold it (`next` only when the author set one)."""
        step = {"key": self.key, "name": self.name, "action_type": self.action_type, "config": self.config}
        if self.next_key:
            step["next"] = self.next_key
        return step


class WorkflowVersion(models.Model):
    """A published, immutable snapshot of a workflow. Runs point at the version they started on."""

    # Never reused (unlike SQLite's integer ids after a delete), so workers may cache versions by id forever.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    trigger_type = models.CharField(max_length=16, choices=_choices(TriggerType))
    trigger_event = models.CharField(max_length=100, blank=True, default="")
    trigger_tag = models.CharField(max_length=64, blank=True, default="")
    trigger_filter = models.JSONField(default=list, blank=True)
    reenrollment = models.CharField(max_length=16, choices=_choices(Reenrollment))
    steps = models.JSONField(default=list)  # [{"key", "name", "action_type", "config", "next"?}, ...] in order
    goals = models.JSONField(default=list, blank=True)  # [{"name", "conditions", "then"}], domain/goals.py
    # It waits for events or has goals: its account's events must look for waiting runs and goals met.
    listens = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        app_label = "workflows"
        ordering = ["workflow", "-number"]
        constraints = [models.UniqueConstraint(fields=["workflow", "number"], name="workflow_version_number")]

    def __str__(self) -> str:
        return f"{self.workflow} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Written once, when published; changing it would split behaviour between workers' caches."""
        if not self._state.adding:
            raise PublishedVersionImmutable(f"version {self.pk} is published and cannot be changed; publish again")
        super().save(*args, **kwargs)

    def trigger_dict(self) -> dict:
        return {
            "type": self.trigger_type,
            "event": self.trigger_event,
            "tag": self.trigger_tag,
            "filter": self.trigger_filter,
        }


_COUNTED = Q(status__in=sorted(COUNTED_FOR_LIMIT))
_IN_FLIGHT = Q(status__in=["active", "queued", "waiting"])


class WorkflowExecution(models.Model):
    """One run of one workflow version for one contact.

    `workflows.domain.execution.Execution` decides its moves; `workflows.infrastructure.store.RunRow` maps
    this row to that entity and back on the hot path.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False)
    # RESTRICT: a workflow or version with runs is archived, not deleted (unless its account goes).
    workflow = models.ForeignKey(Workflow, on_delete=models.RESTRICT, related_name="executions", db_index=False)
    version = models.ForeignKey(WorkflowVersion, on_delete=models.RESTRICT, related_name="executions")
    # Erasing a contact erases its runs and their logs (personal data).
    contact = models.ForeignKey("contacts.Contact", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=16, choices=_choices(ExecutionStatus), default=ExecutionStatus.QUEUED)
    current_step_index = models.PositiveIntegerField(default=0)
    # Where the run is in the graph, by key ("" once its steps are done); `execution.run_path` gives its path.
    current_step_key = models.CharField(max_length=64, blank=True, default="")
    # Why it completed early, when a step or a goal ended it ("ended by step", "goal met: Bought").
    end_reason = models.CharField(max_length=300, blank=True, default="")
    step_count = models.PositiveIntegerField()
    retry_count = models.PositiveIntegerField(default=0)
    # Times an operator retried the run after it FAILED: each is a new message to webhook receivers (a new id).
    manual_retries = models.PositiveIntegerField(default=0)
    # {"event", "trigger": {...}, "steps": [results], "step_keys": [whose result]}
    context = models.JSONField(default=dict, blank=True)
    resume_at = models.DateTimeField(null=True, blank=True)
    paused_from = models.CharField(max_length=16, blank=True, default="")
    last_error = models.TextField(blank=True, default="")  # `Type: message`, redacted, <= 1,000
    last_error_category = models.CharField(max_length=20, blank=True, default="")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    # The one job allowed to move this run next; any other job that arrives is stale and does nothing.
    next_job_id = models.UUIDField(null=True, blank=True, editable=False)
    trigger_source = models.CharField(max_length=10, choices=TriggerSource.choices, default=TriggerSource.API)
    trigger_event = models.CharField(max_length=100, blank=True, default="")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children", db_index=False
    )
    depth = models.PositiveSmallIntegerField(default=0)  # runs started by other runs' steps: parent.depth + 1
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)  # reached COMPLETED, FAILED or CANCELLED
    updated_at = models.DateTimeField(auto_now=True)
    # Not columns: set on a run the API's detail shows (execution_latest_logs), for its serializer.
    latest_logs: list[ExecutionLog]
    log_count: int

    class Meta:
        app_label = "workflows"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="execution_idempotency_key",
            ),
        ]
        indexes = [
            models.Index(fields=["account", "-created_at"], name="execution_account_created"),
            # max_concurrent_executions counts these rows only.
            models.Index(fields=["account"], condition=_COUNTED, name="execution_counted"),
            # The re-enrollment rule: this contact's runs of this workflow.
            models.Index(fields=["workflow", "contact", "status"], name="execution_enrollment"),
            models.Index(fields=["workflow", "-created_at"], name="execution_workflow_created"),
            # Runs in flight (held by a job): what the stranded-run sweep reads, however many runs have ended.
            # On the id, which never changes, so a step's update of a run adds no work to this index.
            models.Index(fields=["id"], condition=_IN_FLIGHT, name="execution_in_flight"),
        ]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status})"


class ExecutionLog(models.Model):
    """One row per attempt of one step: what happened, how long it took, what came back."""

    execution = models.ForeignKey(WorkflowExecution, on_delete=models.CASCADE, related_name="logs", db_index=False)
    step_index = models.PositiveIntegerField()
    step_key = models.CharField(max_length=64, blank=True, default="")
    step_name = models.CharField(max_length=200, blank=True, default="")
    action_type = models.CharField(max_length=32)
    attempt_number = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=_choices(StepOutcome))
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    error_category = models.CharField(max_length=20, blank=True, default="")
    error_details = models.TextField(blank=True, default="")  # the queue's stored-error rule
    response_data = models.JSONField(default=dict, blank=True)  # bounded and redacted (domain.logs)
    # What a deciding step chose and why: {"kind": "branch", "branch": ..., "values": {...}, "next": ...}.
    decision = models.JSONField(default=dict, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["execution", "id"]
        indexes = [models.Index(fields=["execution", "id"], name="execution_log_order")]

    def __str__(self) -> str:
        return f"step {self.step_index} attempt {self.attempt_number}: {self.outcome}"


class ScheduledHook(models.Model):
    """At each tick of `cron` (read in `timezone`), do `action` for the account (workflows.domain.scheduled_hooks).

    Its ticks are a jobs Schedule (`schedule`, named `hook:<id>`), so they fire once per tick however many
    workers run, on the database's clock, and the ticks missed while no worker ran are counted there.
    """

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="scheduled_hooks")
    name = models.CharField(max_length=200)
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    action = models.CharField(max_length=32, choices=_choices(HookAction))
    config = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=_choices(HookStatus), default=HookStatus.ACTIVE)
    # In the queue's database (JOBS_DATABASE), which may be apart: no constraint, and deleting a schedule
    # leaves the hook as it is (only hook_delete and a tick of a deleted hook delete one).
    schedule = models.OneToOneField(
        "jobs.Schedule",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="hook",
        editable=False,
        db_constraint=False,
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["account", "-created_at"], name="hook_account_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron} {self.timezone})"


class ScheduledHookRun(models.Model):
    """What one tick of a hook did: the runs it started (or events posted, or the webhook job queued)."""

    hook = models.ForeignKey(ScheduledHook, on_delete=models.CASCADE, related_name="runs")
    tick = models.DateTimeField()
    missed_ticks = models.PositiveIntegerField(default=0)  # earlier ticks folded into this one (catch-up)
    status = models.CharField(max_length=16, choices=_choices(HookRunStatus))
    job_id = models.UUIDField(null=True, blank=True)  # the scheduled_hook job that ran it
    started = models.PositiveIntegerField(default=0)  # runs started, or contacts the event was posted for
    skipped = models.PositiveIntegerField(default=0)  # contacts the workflow's rules left out
    detail = models.JSONField(default=dict, blank=True)  # execution ids (the first 1,000), the webhook job id
    error = models.TextField(blank=True, default="")  # the queue's stored-error form
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-tick", "-id"]
        constraints = [models.UniqueConstraint(fields=["hook", "tick"], name="hook_run_once_per_tick")]

    def __str__(self) -> str:
        return f"{self.hook_id} @ {self.tick:%Y-%m-%d %H:%M} {self.status}"


class EventWait(models.Model):
    """A run WAITING in a `wait_for_event` step: what it waits for, until when, and the event once it came

    Found by (account, contact, event) through a partial index on the waits no event has reached yet, so an
    event's lookup costs the same whether ten or a million other runs wait on other events. The row is the
    one arbiter of the race between the event and the timeout (workflows.domain.waits): an event is recorded
    on it only while none is and only if it happened before `timeout_at`; resolving the wait deletes it.
    """

    execution = models.OneToOneField(
        WorkflowExecution, on_delete=models.CASCADE, primary_key=True, related_name="event_wait"
    )
    account_id = models.BigIntegerField()
    contact_id = models.BigIntegerField()
    event = models.CharField(max_length=100)
    match = models.JSONField(default=dict, blank=True)
    step_key = models.CharField(max_length=64)
    timeout_at = models.DateTimeField()
    # The event that won, once one came (its id, when it happened, its data): kept while the run is paused.
    event_id = models.CharField(max_length=32, blank=True, default="")
    event_at = models.DateTimeField(null=True, blank=True)
    event_data = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workflows"
        indexes = [
            models.Index(
                fields=["account_id", "contact_id", "event"], condition=Q(event_id=""), name="event_wait_lookup"
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.execution_id} waits for {self.event}"


class GoalHit(models.Model):
    """A run's contact met one of its workflow's goals: recorded in the event's transaction (no lock on the
    run), then carried out by the `workflow_goal` job, or by the step in flight when it finishes. A run meets
    at most one goal; `handled` once the run ended (or jumped) for it."""

    execution = models.OneToOneField(
        WorkflowExecution, on_delete=models.CASCADE, primary_key=True, related_name="goal_hit"
    )
    goal = models.CharField(max_length=100)
    then = models.CharField(max_length=64)
    event_id = models.CharField(max_length=32, blank=True, default="")
    event_name = models.CharField(max_length=100, blank=True, default="")
    met_at = models.DateTimeField()
    handled = models.BooleanField(default=False)

    class Meta:
        app_label = "workflows"

    def __str__(self) -> str:
        return f"run {self.execution_id} met {self.goal}"
