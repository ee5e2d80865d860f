"""Workflows, runs and events over HTTP. Thin: parse, call a workflow service or selector, render.

Every lookup is scoped to the caller's account; another account's workflow
or run is the same 404 as a missing one. A contact id in a body names a
field of the request, not the resource addressed, so a foreign or missing
contact is a 400 naming `contact` (the same for both), as unknown ids in
query filters are (`?account=` on the operator endpoints).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.domain.roles import Permission
from api.filters import Choice, FilterSet, Integer, Text, Timestamp
from api.idempotency import IDEMPOTENCY_KEY_PARAMETER, idempotent
from api.problems import (
    Conflict,
    DomainErrorMap,
    InvalidInput,
    InvalidState,
    NotFound,
    TooManyRequests,
    problem_type,
)
from api.schema import problems
from api.views import AccountView
from contacts.application.selectors import contact_get
from contacts.infrastructure.models import Contact
from workflows.api.serializers import (
    EventIn,
    EventOutcomeOut,
    ExecutionDetailOut,
    ExecutionLogOut,
    ExecutionOut,
    ExecutionStartIn,
    WorkflowChangeIn,
    WorkflowCreateIn,
    WorkflowOut,
    WorkflowReplaceIn,
    WorkflowSummaryOut,
    WorkflowVersionOut,
)
from workflows.application.errors import ContactNotFound
from workflows.application.errors import NotFound as LookupNotFound
from workflows.application.runs.operating import RUN_OPERATIONS, Operator, retry_run
from workflows.application.runs.receiving import post_event
from workflows.application.runs.starting import start_run
from workflows.application.selectors import (
    execution_get,
    execution_latest_logs,
    execution_list,
    execution_logs,
    workflow_get,
    workflow_list,
)
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import (
    ConcurrentExecutionLimitError,
    EnrollmentRefused,
    FieldError,
    IllegalExecutionTransition,
    IllegalWorkflowTransition,
    WorkflowNotActive,
    WorkflowValidationError,
)
from workflows.domain.execution import ExecutionStatus
from workflows.domain.redaction import restore_hidden
from workflows.domain.triggers import TriggerType
from workflows.domain.workflow import WorkflowStatus
from workflows.infrastructure.models import TriggerSource, Workflow

NOT_A_CONTACT = "is not a contact of this account"
EXECUTION_ID = OpenApiParameter("execution_id", UUID, OpenApiParameter.PATH, description="The run's id.")


class EnrollmentRefusedProblem(Conflict):
    type = problem_type("enrollment-refused")
    title = "The contact may not enter this workflow now"


def invalid(errors: list[FieldError], renames: dict[str, str] | None = None) -> InvalidInput:
    """A WorkflowValidationError's problems as a 400, each by its path (a service's name for a field may differ)."""
    renames = renames or {}
    return InvalidInput([{"field": renames.get(e.path, e.path), "message": e.reason} for e in errors])


def run_limit(error: ConcurrentExecutionLimitError) -> TooManyRequests:
    return TooManyRequests(
        str(error),
        retry_after=settings.API_RUN_LIMIT_RETRY_AFTER,
        type_=problem_type("execution-limit"),
        title="Too many runs in progress",
    )


WORKFLOW_ERRORS: DomainErrorMap = {
    LookupNotFound: lambda e: NotFound(),  # a workflow or run of another account, or none at all
    WorkflowValidationError: lambda e: invalid(e.errors),
    IllegalWorkflowTransition: lambda e: InvalidState(str(e), current_state=e.current),
    IllegalExecutionTransition: lambda e: InvalidState(str(e), current_state=str(e.current)),
    EnrollmentRefused: lambda e: EnrollmentRefusedProblem(str(e)),
    ConcurrentExecutionLimitError: run_limit,
}

CREATED_FILTERS = (
    Timestamp("created_after", "Only those created at or after this time (ISO 8601)."),
    Timestamp("created_before", "Only those created before this time (ISO 8601)."),
)
RUN_STATUS = Choice("status", ExecutionStatus, "Only runs in this state.")
RUN_CONTACT = Integer(
    "contact", "Only this contact's runs (another account's contact matches none).", maximum=10**18 - 1
)


class WorkflowView(AccountView):
    write_permission = Permission.MANAGE_WORKFLOWS
    domain_errors = WORKFLOW_ERRORS

    def workflow(self, workflow_id: int) -> Workflow:
        return workflow_get(workflow_id=workflow_id, account_id=self.account_id)

    def workflow_response(self, workflow_id: int, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(WorkflowOut(self.workflow(workflow_id)).data, status=status, headers=headers)


# --- Workflows ------------------------------------------------------------------------------------


class WorkflowListView(WorkflowView):
    filters = FilterSet(
        Choice("status", WorkflowStatus, "Only workflows in this state."),
        Choice("trigger_type", TriggerType, "Only workflows with this kind of trigger."),
        Text("trigger_event", "Only workflows started by this event (e.g. tag.added).", max_length=100),
        *CREATED_FILTERS,
    )

    @extend_schema(
        operation_id="workflows_list",
        summary="List workflows, newest first",
        responses=WorkflowSummaryOut(many=True),
    )
    def get(self, request: Request) -> Response:
        workflows = workflow_list(account_id=self.account_id, with_step_count=True, **self.parse_filters())
        return self.paginated(workflows, WorkflowSummaryOut)

    @extend_schema(
        operation_id="workflows_create",
        summary="Create a workflow (a draft)",
        description="Every part is checked and every problem named by its path (`steps[2].config.url`); nothing "
        "is stored if there is one. The new workflow is a draft: publish it to take runs.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=WorkflowCreateIn,
        responses={201: WorkflowOut, **problems(422)},
    )
    def post(self, request: Request) -> HttpResponse:
        return idempotent(self, lambda: self._create(request))

    def _create(self, request: Request) -> Response:
        body = WorkflowCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        workflow = WorkflowService().create(account_id=self.account_id, **body.parts())
        location = reverse("api-workflow-detail", kwargs={"workflow_id": workflow.pk})
        return self.workflow_response(workflow.pk, status=201, headers={"Location": location})


class WorkflowDetailView(WorkflowView):
    @extend_schema(operation_id="workflows_read", summary="Read a workflow", responses=WorkflowOut)
    def get(self, request: Request, workflow_id: int) -> Response:
        return self.workflow_response(workflow_id)

    @extend_schema(
        operation_id="workflows_replace",
        summary="Replace a workflow's draft",
        description="Every part is required. Runs in flight and the published version are not touched: publish "
        "to make new runs use the draft. An archived workflow cannot be edited (409; restore it first).",
        request=WorkflowReplaceIn,
        responses={200: WorkflowOut, **problems(409)},
    )
    def put(self, request: Request, workflow_id: int) -> Response:
        return self._change(request, workflow_id, WorkflowReplaceIn)

    @extend_schema(
        operation_id="workflows_update",
        summary="Change parts of a workflow's draft",
        description="Only the parts given change; `steps`, when given, replaces the draft's steps. Hidden webhook "
        "values sent back unchanged keep the stored ones. An archived workflow cannot be edited (409).",
        request=WorkflowChangeIn,
        responses={200: WorkflowOut, **problems(409)},
    )
    def patch(self, request: Request, workflow_id: int) -> Response:
        return self._change(request, workflow_id, WorkflowChangeIn)

    @extend_schema(
        operation_id="workflows_archive",
        summary="Archive a workflow",
        description="Workflows are archived, never deleted: it takes no new runs, runs in flight carry on and its "
        "history stays. Archiving an archived workflow changes nothing. POST .../restore brings it back as a draft.",
        responses={200: WorkflowOut},
    )
    def delete(self, request: Request, workflow_id: int) -> Response:
        # The service treats "already archived" under the row lock, so a concurrent DELETE is a 200 too, not a 409.
        WorkflowService().archive(workflow_id=workflow_id, account_id=self.account_id)
        return self.workflow_response(workflow_id)

    def _change(self, request: Request, workflow_id: int, serializer_class: type) -> Response:
        workflow = self.workflow(workflow_id)
        body = serializer_class(data=request.data)
        body.is_valid(raise_exception=True)
        parts = body.parts()
        if "steps" in parts:
            parts["steps"], unresolved = restore_hidden(parts["steps"], [s.as_dict() for s in workflow.steps.all()])
            if unresolved:
                raise invalid(unresolved)
        WorkflowService().update(workflow_id=workflow.pk, account_id=self.account_id, **parts)
        return self.workflow_response(workflow.pk)


class WorkflowPublishView(WorkflowView):
    @extend_schema(
        operation_id="workflows_publish",
        summary="Publish the draft as a new version",
        description="Freezes the draft (it needs at least one step) as the next version and makes the workflow "
        "active; new runs start on it, runs in flight keep theirs. 201 with the new version; 200 with the current "
        "one when the draft is identical to it (no new version). An archived workflow answers 409.",
        request=None,
        responses={201: WorkflowVersionOut, 200: WorkflowVersionOut, **problems(409)},
    )
    def post(self, request: Request, workflow_id: int) -> Response:
        # Whether a version was made is decided under the row lock: two identical publishes racing get 201 and 200.
        published = WorkflowService().publish_draft(
            workflow_id=workflow_id, account_id=self.account_id, published_by_id=request.user.pk
        )
        return Response(WorkflowVersionOut(published.version).data, status=201 if published.created else 200)


class WorkflowMoveView(WorkflowView):
    """pause, activate, restore: one service call each, the workflow back."""

    action: str = ""

    def post(self, request: Request, workflow_id: int) -> Response:
        getattr(WorkflowService(), self.action)(workflow_id=workflow_id, account_id=self.account_id)
        return self.workflow_response(workflow_id)


def _move_view(action: str, summary: str, description: str) -> type[WorkflowMoveView]:
    def post(self, request: Request, workflow_id: int) -> Response:  # its own function: its own schema
        return WorkflowMoveView.post(self, request, workflow_id)

    decorated = extend_schema(
        operation_id=f"workflows_{action}",
        summary=summary,
        description=description,
        request=None,
        responses={200: WorkflowOut, **problems(409)},
    )(post)
    return type(f"Workflow{action.title()}View", (WorkflowMoveView,), {"action": action, "post": decorated})


WorkflowPauseView = _move_view(
    "pause", "Pause a workflow", "An active workflow takes no new runs; runs in flight carry on. Else 409."
)
WorkflowActivateView = _move_view(
    "activate", "Activate a paused workflow", "It takes new runs again, on its current version. Else 409."
)
WorkflowRestoreView = _move_view(
    "restore", "Restore an archived workflow", "It comes back as a draft (publish it to take runs). Else 409."
)


# --- Starting runs --------------------------------------------------------------------------------


class WorkflowExecutionsView(WorkflowView):
    filters = FilterSet(RUN_STATUS, RUN_CONTACT, *CREATED_FILTERS)

    def required_permission(self, request: Request) -> Permission:
        return Permission.VIEW if request.method in ("GET", "HEAD") else Permission.RUN_WORKFLOWS

    @extend_schema(
        operation_id="workflows_executions_list",
        summary="This workflow's runs, newest first",
        responses=ExecutionOut(many=True),
    )
    def get(self, request: Request, workflow_id: int) -> Response:
        workflow = self.workflow(workflow_id)
        runs = execution_list(account_id=self.account_id, workflow_id=workflow.pk, **self._filters())
        return self.paginated(runs, ExecutionOut)

    @extend_schema(
        operation_id="workflows_executions_start",
        summary="Start a run for a contact",
        description="The workflow must be active (else 409). Over the account's limit of runs queued or active "
        "it answers 429 with Retry-After and stores nothing. The re-enrollment rule may refuse the contact (409). "
        "A contact that is not the account's is a 400 naming `contact`.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=ExecutionStartIn,
        responses={201: ExecutionOut, **problems(409, 422)},
    )
    def post(self, request: Request, workflow_id: int) -> HttpResponse:
        return idempotent(self, lambda: self._start(request, workflow_id))

    def _filters(self) -> dict[str, Any]:
        filters = self.parse_filters()
        if "contact" in filters:
            filters["contact_id"] = filters.pop("contact")
        return filters

    def _start(self, request: Request, workflow_id: int) -> Response:
        body = ExecutionStartIn(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            started = start_run(
                workflow_id=workflow_id,
                contact_id=body.validated_data["contact"],
                account_id=self.account_id,
                trigger_data=body.validated_data.get("data"),
                source=TriggerSource.API,
                started_by_id=request.user.pk,
            )
        except ContactNotFound:
            raise InvalidInput.field("contact", NOT_A_CONTACT) from None
        except WorkflowValidationError as exc:
            raise invalid(exc.errors, {"trigger_data": "data"}) from None
        except WorkflowNotActive as exc:
            raise InvalidState(str(exc), current_state=self.workflow(workflow_id).status) from None
        run = started.execution
        location = reverse("api-execution-detail", kwargs={"execution_id": run.pk})
        return Response(ExecutionOut(run).data, status=201, headers={"Location": location})


class EventView(WorkflowView):
    write_permission = Permission.RUN_WORKFLOWS

    @extend_schema(
        operation_id="events_send",
        summary="Send an event about a contact",
        description="Starts every active workflow triggered by this event name (subject to each one's contact "
        "filter, re-enrollment rule and the account's run limit) and answers the runs started and the workflows "
        "skipped, with the reason; the event is stored on the contact, and runs waiting for it (wait_for_event) or "
        "having it as a goal learn of it. Relay's own events (contact.created, tag.added, email.clicked ...) cannot "
        "be sent: they happen when the contact changes or engages. A contact that is not the account's is a 400 "
        "naming `contact`.",
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
        request=EventIn,
        responses={200: EventOutcomeOut, **problems(422)},
    )
    def post(self, request: Request) -> HttpResponse:
        return idempotent(self, lambda: self._record(request))

    def _record(self, request: Request) -> Response:
        body = EventIn(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            contact = contact_get(account_id=self.account_id, contact_id=body.validated_data["contact"])
            outcome = post_event(
                account_id=self.account_id,
                contact_id=contact.pk,
                name=body.validated_data["name"],
                data=body.validated_data.get("data"),
            )
        except (Contact.DoesNotExist, ContactNotFound):
            raise InvalidInput.field("contact", NOT_A_CONTACT) from None
        return Response(EventOutcomeOut(outcome).data)


# --- Runs -----------------------------------------------------------------------------------------


class ExecutionView(AccountView):
    write_permission = Permission.RUN_WORKFLOWS
    domain_errors = WORKFLOW_ERRORS

    @property
    def operator(self) -> Operator:
        """Who moves a run through the API, as its history records them: the token's user and prefix."""
        return Operator(user_id=self.caller.user_id, via="api", prefix=self.caller.token_prefix)


class ExecutionListView(ExecutionView):
    filters = FilterSet(
        RUN_STATUS,
        Integer("workflow", "Only this workflow's runs (another account's workflow matches none).", maximum=10**18 - 1),
        RUN_CONTACT,
        *CREATED_FILTERS,
    )

    @extend_schema(operation_id="executions_list", summary="Runs, newest first", responses=ExecutionOut(many=True))
    def get(self, request: Request) -> Response:
        filters = self.parse_filters()
        runs = execution_list(
            account_id=self.account_id,
            workflow_id=filters.pop("workflow", None),
            contact_id=filters.pop("contact", None),
            **filters,
        )
        return self.paginated(runs, ExecutionOut)


class ExecutionDetailView(ExecutionView):
    @extend_schema(
        operation_id="executions_read",
        summary="Read a run with its latest step logs",
        parameters=[EXECUTION_ID],
        responses=ExecutionDetailOut,
    )
    def get(self, request: Request, execution_id: UUID) -> Response:
        run = execution_get(execution_id=execution_id, account_id=self.account_id, with_logs=False)
        run.latest_logs, run.log_count = execution_latest_logs(execution=run, limit=settings.API_EXECUTION_LOG_LIMIT)
        return Response(ExecutionDetailOut(run).data)


class ExecutionLogsView(ExecutionView):
    ordering = ("id",)  # oldest first: a run's history reads in order

    @extend_schema(
        operation_id="executions_logs",
        summary="Every step log of a run, oldest first",
        parameters=[EXECUTION_ID],
        responses=ExecutionLogOut(many=True),
    )
    def get(self, request: Request, execution_id: UUID) -> Response:
        self.parse_filters()  # no filters: refuses unknown parameters
        return self.paginated(execution_logs(execution_id=execution_id, account_id=self.account_id), ExecutionLogOut)


class ExecutionMoveView(ExecutionView):
    """pause, resume, cancel, retry: one call each (`RUN_OPERATIONS`), the run back; 409 names its state."""

    action: str = ""

    def post(self, request: Request, execution_id: UUID) -> Response:
        if self.action == "retry":  # the run's history says who retried it (when that lifts the loop cap)
            run = retry_run(execution_id=execution_id, account_id=self.account_id, by=self.operator)
        else:
            run = RUN_OPERATIONS[self.action](execution_id=execution_id, account_id=self.account_id)
        return Response(ExecutionOut(run).data)


def _run_move_view(action: str, summary: str, description: str) -> type[ExecutionMoveView]:
    def post(self, request: Request, execution_id: UUID) -> Response:  # its own function: its own schema
        return ExecutionMoveView.post(self, request, execution_id)

    decorated = extend_schema(
        operation_id=f"executions_{action}",
        summary=summary,
        description=description + " An illegal move answers 409 with `current_state`.",
        parameters=[EXECUTION_ID],
        request=None,
        responses={200: ExecutionOut, **problems(409)},
    )(post)
    return type(f"Execution{action.title()}View", (ExecutionMoveView,), {"action": action, "post": decorated})


ExecutionPauseView = _run_move_view(
    "pause",
    "Pause a run",
    "From queued, waiting or active: its queued job is cancelled; a step in flight still finishes and is logged.",
)
ExecutionResumeView = _run_move_view(
    "resume", "Resume a paused run", "A wait whose time passed meanwhile goes on at once, else waits the remainder."
)
ExecutionCancelView = _run_move_view("cancel", "Cancel a run", "From any unfinished state; it never runs another step.")
ExecutionRetryView = _run_move_view(
    "retry",
    "Retry a failed run",
    "A failed run starts again from the step that failed, with fresh attempts. A run the loop cap failed goes on "
    "from the step it was capped at with a fresh allowance of steps; its logs record who retried it and when.",
)
