"""WorkflowService: create and edit a workflow's draft, publish it as a version, pause, activate, archive, restore.

Every save checks the whole draft and refuses it with every problem named by
its path (`trigger.event`, `steps[2].config.url`) and nothing stored. A
draft may be incomplete (no steps yet); publishing needs at least one step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Max

from accounts.application.selectors import account_exists
from integrations.domain.sending import Problems, parse_workflow_rules
from workflows.application.definitions import definition_from
from workflows.application.errors import WorkflowNotFound
from workflows.application.trigger_cache import triggers_changed
from workflows.domain.errors import FieldError, WorkflowValidationError
from workflows.domain.triggers import BUILTIN_EVENTS
from workflows.domain.waits import EventWait
from workflows.domain.workflow import WorkflowDefinition, WorkflowStatus, check_editable, workflow_move
from workflows.infrastructure.models import Workflow, WorkflowStep, WorkflowVersion

MAX_NAME = 200
MAX_DESCRIPTION = 5000
UNCHANGED: Any = object()  # update(): leave this part as it is


@dataclass(frozen=True)
class Published:
    """What a publish did: the version new runs use, and whether this publish made it."""

    version: WorkflowVersion
    created: bool


class WorkflowService:
    def create(
        self,
        *,
        account_id: int,
        name: str,
        description: str = "",
        trigger: Mapping[str, Any] | None = None,
        reenrollment: str = "never",
        steps: Sequence[Mapping[str, Any]] = (),
        goals: Any = (),
        track_email_engagement: bool | None = None,
        sending_rules: Any = None,
    ) -> Workflow:
        """A new draft workflow; WorkflowValidationError (every problem, with its path) stores nothing.

        `sending_rules`: its overrides of the account's send windows and caps (Workflow.sending_rules, read live
        when a message is sent, not frozen in a version; docs/decisions/sending-rules.md)."""
        trigger = _trigger_part(trigger, default={"type": "manual"})
        definition = self._check(
            name=name,
            description=description,
            trigger=trigger,
            reenrollment=reenrollment,
            steps=steps,
            goals=list(goals) if isinstance(goals, tuple) else goals,
            track_email_engagement=track_email_engagement,
            sending_rules=sending_rules,
        )
        with transaction.atomic():
            if not account_exists(account_id):
                raise WorkflowValidationError.single("account", f"no account with id {account_id}")
            workflow = Workflow(
                account_id=account_id,
                name=name.strip(),
                description=description or "",
                goals=[goal.as_dict() for goal in definition.goals],
                track_email_engagement=track_email_engagement,
                sending_rules=dict(sending_rules or {}),
            )
            _apply_trigger(workflow, definition)
            workflow.save(force_insert=True)
            _replace_steps(workflow, steps, definition)
        return workflow

    def update(
        self,
        *,
        workflow_id: int,
        account_id: int | None = None,
        name: str = UNCHANGED,
        description: str = UNCHANGED,
        trigger: Mapping[str, Any] = UNCHANGED,
        reenrollment: str = UNCHANGED,
        steps: Sequence[Mapping[str, Any]] = UNCHANGED,
        goals: Any = UNCHANGED,
        track_email_engagement: Any = UNCHANGED,
        sending_rules: Any = UNCHANGED,
    ) -> Workflow:
        """Change the draft (the parts given). Runs in flight and the published version are not touched, except
        by `sending_rules` and `track_email_engagement`, which are read live (the next message obeys them)."""
        with transaction.atomic():
            workflow = _locked(workflow_id, account_id)
            check_editable(workflow.status)
            new_name = workflow.name if name is UNCHANGED else name
            new_description = workflow.description if description is UNCHANGED else description
            new_trigger = workflow.trigger_dict() if trigger is UNCHANGED else _trigger_part(trigger, default={})
            new_rule = workflow.reenrollment if reenrollment is UNCHANGED else reenrollment
            new_steps = _draft_steps(workflow) if steps is UNCHANGED else steps
            new_goals = workflow.goals if goals is UNCHANGED else goals
            tracking = (
                workflow.track_email_engagement if track_email_engagement is UNCHANGED else track_email_engagement
            )
            rules = workflow.sending_rules if sending_rules is UNCHANGED else sending_rules
            definition = self._check(
                name=new_name,
                description=new_description,
                trigger=new_trigger,
                reenrollment=new_rule,
                steps=new_steps,
                goals=new_goals,
                track_email_engagement=tracking,
                sending_rules=rules,
            )
            workflow.goals = [goal.as_dict() for goal in definition.goals]
            workflow.track_email_engagement = tracking
            workflow.sending_rules = dict(rules or {})
            workflow.name = new_name.strip()
            workflow.description = new_description or ""
            _apply_trigger(workflow, definition)
            workflow.save(
                update_fields=[
                    "name",
                    "description",
                    "trigger_type",
                    "trigger_event",
                    "trigger_tag",
                    "trigger_filter",
                    "reenrollment",
                    "goals",
                    "track_email_engagement",
                    "sending_rules",
                    "updated_at",
                ]
            )
            if steps is not UNCHANGED:
                _replace_steps(workflow, steps, definition)
        return workflow

    def publish(
        self, *, workflow_id: int, account_id: int | None = None, published_by_id: int | None = None
    ) -> WorkflowVersion:
        """Freeze the draft as the next version and make the workflow active; its new runs use that version.

        Publishing a draft identical to the current version makes no new version.
        """
        return self.publish_draft(
            workflow_id=workflow_id, account_id=account_id, published_by_id=published_by_id
        ).version

    def publish_draft(
        self, *, workflow_id: int, account_id: int | None = None, published_by_id: int | None = None
    ) -> Published:
        """`publish`, saying whether it made a new version: decided under the workflow's row lock, so of two
        identical publishes racing, exactly one reports a new version (the API's 201 vs 200)."""
        with transaction.atomic():
            workflow = _locked(workflow_id, account_id)
            target = workflow_move(workflow.status, "publish", has_version=workflow.current_version_id is not None)
            steps = _draft_steps(workflow)
            definition = definition_from(
                trigger=workflow.trigger_dict(), reenrollment=workflow.reenrollment, steps=steps, goals=workflow.goals
            )
            frozen = {
                "trigger_type": definition.trigger.type.value,
                "trigger_event": definition.trigger.event,
                "trigger_tag": definition.trigger.tag,
                "trigger_filter": definition.trigger.as_dict()["filter"],
                "reenrollment": definition.reenrollment.value,
                "steps": steps,
                "goals": [goal.as_dict() for goal in definition.goals],
                # Its account's events then look for waiting runs and goals met (runs.receiving).
                "listens": bool(definition.goals)
                or any(isinstance(step.config, EventWait) for step in definition.steps),
            }
            current = workflow.current_version
            if current is not None and all(getattr(current, k) == v for k, v in frozen.items()):
                version, created = current, False
            else:
                created = True
                number = (workflow.versions.aggregate(n=Max("number"))["n"] or 0) + 1
                version = WorkflowVersion.objects.create(
                    workflow=workflow, number=number, created_by_id=published_by_id, **frozen
                )
            workflow.current_version = version
            workflow.status = target
            workflow.save(update_fields=["current_version", "status", "updated_at"])
            triggers_changed(workflow.account_id)
        return Published(version=version, created=created)

    def pause(self, *, workflow_id: int, account_id: int | None = None) -> Workflow:
        """Take no new runs; runs in flight carry on."""
        return self._move(workflow_id, account_id, "pause")

    def activate(self, *, workflow_id: int, account_id: int | None = None) -> Workflow:
        """A paused workflow takes new runs again, on its current version."""
        return self._move(workflow_id, account_id, "activate")

    def archive(self, *, workflow_id: int, account_id: int | None = None) -> Workflow:
        """Retire it: read-only, no new runs; runs in flight carry on, and its history stays.

        Archiving an archived workflow changes nothing and is no error: checked under the row lock, so two
        archives racing (two API DELETEs) both succeed instead of the second failing.
        """
        with transaction.atomic():
            workflow = _locked(workflow_id, account_id)
            if workflow.status == WorkflowStatus.ARCHIVED:
                return workflow
            return self._move(workflow_id, account_id, "archive")

    def restore(self, *, workflow_id: int, account_id: int | None = None) -> Workflow:
        """Bring an archived workflow back as a draft (publish it to take runs again)."""
        return self._move(workflow_id, account_id, "restore")

    def _move(self, workflow_id: int, account_id: int | None, action: str) -> Workflow:
        with transaction.atomic():
            workflow = _locked(workflow_id, account_id)
            workflow.status = workflow_move(
                workflow.status, action, has_version=workflow.current_version_id is not None
            )
            workflow.save(update_fields=["status", "updated_at"])
            triggers_changed(workflow.account_id)
        return workflow

    @staticmethod
    def _check(
        *,
        name: Any,
        description: Any,
        trigger: Any,
        reenrollment: Any,
        steps: Any,
        known_events: frozenset[str] | None = None,
        goals: Any = None,
        track_email_engagement: Any = None,
        sending_rules: Any = None,
    ) -> WorkflowDefinition:
        errors: list[FieldError] = []
        if sending_rules is not None:
            problems = Problems()
            parse_workflow_rules(sending_rules, "sending_rules", problems)
            errors.extend(FieldError(problem.path, problem.reason) for problem in problems)
        if track_email_engagement is not None and not isinstance(track_email_engagement, bool):
            errors.append(FieldError("track_email_engagement", "must be true, false or null (the account's setting)"))
        if not isinstance(name, str) or not name.strip():
            errors.append(FieldError("name", "is required"))
        elif len(name.strip()) > MAX_NAME:
            errors.append(FieldError("name", f"must be at most {MAX_NAME} characters"))
        if description is not None and not isinstance(description, str):
            errors.append(FieldError("description", "must be a string"))
        elif description and len(description) > MAX_DESCRIPTION:
            errors.append(FieldError("description", f"must be at most {MAX_DESCRIPTION} characters"))
        definition = None
        try:
            definition = definition_from(
                trigger=trigger,
                reenrollment=reenrollment,
                steps=steps,
                require_steps=False,
                known_events=known_events,
                goals=goals,
            )
        except WorkflowValidationError as exc:
            errors.extend(exc.errors)
        if errors or definition is None:
            raise WorkflowValidationError(errors)
        return definition


def check_workflow(
    *,
    name: Any,
    description: Any = "",
    trigger: Any,
    reenrollment: Any,
    steps: Any,
    known_events: frozenset[str] | None = None,
    goals: Any = None,
) -> WorkflowDefinition:
    """Check a draft without saving it (the admin's forms use this to place errors on their fields).

    `known_events`: the events an event trigger may name (the admin offers the account's); None accepts any.
    """
    return WorkflowService._check(
        name=name,
        description=description,
        trigger=trigger,
        reenrollment=reenrollment,
        steps=steps,
        known_events=known_events,
        goals=goals,
    )


def known_events(*, account_id: int, also: Sequence[str] = ()) -> frozenset[str]:
    """The events a marketer may pick for a trigger: Relay's own, and the custom events the account uses.

    A custom event is known once one of the account's workflows (saved through the API or the admin) is
    triggered by it; `also` adds the ones the marketer declares while editing.
    """
    used = Workflow.objects.filter(account_id=account_id, trigger_type="event").values_list("trigger_event", flat=True)
    return frozenset({*BUILTIN_EVENTS, *(name for name in used if name), *also})


def _trigger_part(trigger: Any, *, default: dict[str, Any]) -> Any:
    """A copy of a trigger object; anything else as given, for the check to name (`trigger: must be an object`)."""
    if not trigger:
        return dict(default)
    return dict(trigger) if isinstance(trigger, Mapping) else trigger


def _locked(workflow_id: int, account_id: int | None) -> Workflow:
    query = Workflow.objects.select_for_update()
    if account_id is not None:
        query = query.filter(account_id=account_id)
    try:
        return query.get(pk=workflow_id)
    except (Workflow.DoesNotExist, ValueError, TypeError):
        raise WorkflowNotFound(workflow_id) from None


def _apply_trigger(workflow: Workflow, definition: WorkflowDefinition) -> None:
    trigger = definition.trigger.as_dict()
    workflow.trigger_type = trigger["type"]
    workflow.trigger_event = trigger["event"]
    workflow.trigger_tag = trigger["tag"]
    workflow.trigger_filter = trigger["filter"]
    workflow.reenrollment = definition.reenrollment.value


def _draft_steps(workflow: Workflow) -> list[dict[str, Any]]:
    return [step.as_dict() for step in WorkflowStep.objects.filter(workflow=workflow).order_by("position", "id")]


def _replace_steps(workflow: Workflow, steps: Sequence[Mapping[str, Any]], definition: WorkflowDefinition) -> None:
    """The draft's rows: each step with its key (the author's, or the generated `step_<n>`) and its `next`
    as the author wrote it (blank: the following step). The definition was checked: it has every step."""
    WorkflowStep.objects.filter(workflow=workflow).delete()
    WorkflowStep.objects.bulk_create(
        WorkflowStep(
            workflow=workflow,
            position=index,
            key=parsed.key,
            name=(raw.get("name") or "").strip(),
            action_type=raw["action_type"],
            config=dict(raw.get("config") or {}),
            next_key=parsed.explicit_next,
        )
        for index, (raw, parsed) in enumerate(zip(steps, definition.steps, strict=True))
    )
