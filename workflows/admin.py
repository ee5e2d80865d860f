"""The marketer's and operator's admin: build a workflow with its steps, publish it, start runs, watch their logs.

Thin: forms check input with the same domain validation the services use
(errors land on the field they name), saves and every action call
WorkflowService and the run use cases (workflows.application.runs). Fenced by account (accounts.admin_scoping):
a staff user sees, changes and starts runs of their accounts' workflows only.
Published versions and log rows show webhook credentials redacted, as the API does.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from accounts.admin_scoping import AccountScopedAdmin, check_account
from accounts.domain.roles import Permission
from contacts.infrastructure.models import Contact
from workflows.application.definitions import validation_context
from workflows.application.errors import NotFound
from workflows.application.runs.operating import RUN_OPERATIONS, cancel_run, pause_run, resume_run, retry_run
from workflows.application.runs.starting import start_run
from workflows.application.selectors import has_unpublished_changes
from workflows.application.workflows import WorkflowService, check_workflow
from workflows.domain.errors import IllegalExecutionTransition, WorkflowDomainError, WorkflowValidationError
from workflows.domain.redaction import shown_json, shown_step, shown_steps
from workflows.domain.workflow import WorkflowStatus, parse_steps
from workflows.infrastructure.models import (
    ExecutionLog,
    TriggerSource,
    Workflow,
    WorkflowExecution,
    WorkflowStep,
    WorkflowVersion,
)

_STEP_PATH = re.compile(r"steps\[(\d+)\](?:\.(\w+))?(?:\.(.*))?")
# Where a workflow-level error path is shown in the workflow form.
_WORKFLOW_FIELDS = {
    "name": "name",
    "description": "description",
    "trigger.type": "trigger_type",
    "trigger.event": "trigger_event",
    "trigger.tag": "trigger_tag",
    "trigger.filter": "trigger_filter",
    "reenrollment": "reenrollment",
}


# --- workflows ---------------------------------------------------------------------------------
class WorkflowForm(forms.ModelForm):
    class Meta:
        model = Workflow
        fields = [
            "account",
            "name",
            "description",
            "trigger_type",
            "trigger_event",
            "trigger_tag",
            "trigger_filter",
            "reenrollment",
        ]

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a ModelForm's clean() returns its cleaned_data
        try:
            check_workflow(
                name=data.get("name", self.instance.name),
                description=data.get("description", ""),
                trigger={
                    "type": data.get("trigger_type") or "manual",
                    "event": data.get("trigger_event") or "",
                    "tag": data.get("trigger_tag") or "",
                    "filter": data.get("trigger_filter") or [],
                },
                reenrollment=data.get("reenrollment") or "never",
                steps=[],  # the steps' own formset checks them
            )
        except WorkflowValidationError as exc:
            for error in exc.errors:
                field = _workflow_field(error.path)
                message = error.reason if field and error.path == _field_path(field) else str(error)
                self.add_error(field if field in self.fields else None, message)
        return data


def _workflow_field(path: str) -> str | None:
    for prefix, field in _WORKFLOW_FIELDS.items():
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return field
    return None


def _field_path(field: str) -> str:
    return next(p for p, f in _WORKFLOW_FIELDS.items() if f == field)


class StepFormSet(BaseInlineFormSet):
    """Checks the steps together, as they will run, and puts each error on the step and field it names."""

    # Not Django's `ordered_forms` property (can_order is off here): the steps' forms in the order they will run.
    def ordered_forms(self) -> list[forms.ModelForm]:  # type: ignore[override]
        kept = [
            form
            for form in self.forms
            if getattr(form, "cleaned_data", None)
            and not form.cleaned_data.get("DELETE")
            and form.cleaned_data.get("action_type")
        ]
        return sorted(kept, key=lambda f: (f.cleaned_data.get("position") is None, f.cleaned_data.get("position") or 0))

    def steps(self) -> list[dict[str, Any]]:
        return [
            {
                "name": form.cleaned_data.get("name") or "",
                "action_type": form.cleaned_data["action_type"],
                "config": form.cleaned_data.get("config") or {},
            }
            for form in self.ordered_forms()
        ]

    def clean(self) -> None:
        super().clean()
        if any(form.errors for form in self.forms):
            return
        ordered = self.ordered_forms()
        try:
            parse_steps(self.steps(), validation_context())
        except WorkflowValidationError as exc:
            for error in exc.errors:
                match = _STEP_PATH.fullmatch(error.path)
                if not match:
                    raise ValidationError(str(error)) from None
                form = ordered[int(match.group(1))]
                part, rest = match.group(2), match.group(3)
                if part == "config":
                    form.add_error("config", f"{rest}: {error.reason}" if rest else error.reason)
                elif part in ("name", "action_type"):
                    form.add_error(part, error.reason)
                else:
                    form.add_error(None, error.reason if part is None else str(error))


class WorkflowStepInline(admin.StackedInline):
    model = WorkflowStep
    formset = StepFormSet
    extra = 1
    fields = ("position", "name", "action_type", "config")
    ordering = ("position", "id")
    # Who may only look (view permission, or an archived workflow) sees webhook credentials redacted.
    shown_fields = ("position", "name", "action_type", "config_shown")

    def get_fields(self, request: HttpRequest, obj: Workflow | None = None) -> tuple[str, ...]:
        return self.fields if self.has_change_permission(request, obj) else self.shown_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Workflow | None = None) -> tuple[str, ...]:
        return () if self.has_change_permission(request, obj) else self.shown_fields

    @admin.display(description="config")
    def config_shown(self, step: WorkflowStep) -> str:
        return format_html("<code>{}</code>", json.dumps(shown_step(step.as_dict())["config"], ensure_ascii=False))

    def has_change_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        """Steps are part of their workflow: whoever may change the workflow (permission, role, not archived)
        may change its steps."""
        return self.admin_site.get_model_admin(Workflow).has_change_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        return self.has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        return self.has_change_permission(request, obj)


class WorkflowVersionInline(admin.TabularInline):
    model = WorkflowVersion
    extra = 0
    can_delete = False
    fields = (
        "number",
        "created_at",
        "created_by",
        "trigger_type",
        "trigger_event",
        "reenrollment",
        "step_names",
        "steps_shown",
    )
    readonly_fields = fields
    ordering = ("-number",)
    verbose_name_plural = "published versions"

    @admin.display(description="steps")
    def step_names(self, version: WorkflowVersion) -> str:
        return " → ".join(s.get("name") or s.get("action_type", "?") for s in version.steps)

    @admin.display(description="steps as published")
    def steps_shown(self, version: WorkflowVersion) -> str:
        """The frozen steps with webhook URLs cut to their host and secret headers and body values hidden."""
        return format_html("<code>{}</code>", json.dumps(shown_steps(version.steps), ensure_ascii=False)[:4000])

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StartRunForm(forms.Form):
    contact = forms.CharField(help_text="The contact's id or email address (in this workflow's account).")
    trigger_data = forms.JSONField(
        required=False, initial=dict, help_text='Data the templates see as {{ trigger.* }}, e.g. {"plan": "pro"}.'
    )
    idempotency_key = forms.CharField(required=False, max_length=200, help_text="Optional: the same key, one run.")

    def __init__(self, *args: Any, workflow: Workflow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workflow = workflow

    def clean_contact(self) -> Contact:
        value = self.cleaned_data["contact"].strip()
        contacts = Contact.objects.filter(account_id=self.workflow.account_id)
        contact = contacts.filter(pk=int(value)).first() if value.isdigit() else contacts.filter(email=value).first()
        if contact is None:
            raise ValidationError("No contact with this id or email address in the workflow's account.")
        return contact

    def clean_trigger_data(self) -> dict[str, Any]:
        data = self.cleaned_data.get("trigger_data") or {}
        if not isinstance(data, dict):
            raise ValidationError("Must be a JSON object.")
        return data


@admin.register(Workflow)
class WorkflowAdmin(AccountScopedAdmin):
    form = WorkflowForm
    inlines = [WorkflowStepInline, WorkflowVersionInline]
    list_display = ("name", "account", "status", "trigger", "live_version", "unpublished_changes", "updated_at")
    list_filter = ("status", "trigger_type", ("account", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "description", "trigger_event")
    readonly_fields = ("status", "current_version", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("account", "name", "description", "status", "current_version")}),
        ("Trigger", {"fields": ("trigger_type", "trigger_event", "trigger_tag", "trigger_filter", "reenrollment")}),
        ("History", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    actions = ["publish", "pause", "activate", "archive", "restore", "start_run"]
    account_roles = {
        **dict.fromkeys(("add", "change", "delete"), Permission.MANAGE_WORKFLOWS),
        "start": Permission.RUN_WORKFLOWS,
    }
    list_select_related = ("account", "current_version")
    change_form_template = "admin/workflows/workflow/change_form.html"

    @admin.display(description="trigger")
    def trigger(self, workflow: Workflow) -> str:
        if workflow.trigger_type != "event":
            return workflow.trigger_type
        return f"{workflow.trigger_event}" + (f" ({workflow.trigger_tag})" if workflow.trigger_tag else "")

    @admin.display(description="live version")
    def live_version(self, workflow: Workflow) -> str:
        return f"v{workflow.current_version.number}" if workflow.current_version else "-"

    @admin.display(description="unpublished changes", boolean=True)
    def unpublished_changes(self, workflow: Workflow) -> bool:
        return has_unpublished_changes(workflow)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if isinstance(obj, Workflow) and obj.status == WorkflowStatus.ARCHIVED:
            return False  # archived workflows are read-only; restore one to edit it
        return super().has_change_permission(request, obj)

    # --- saving through the service --------------------------------------------------------
    # This admin is registered for Workflow only: it narrows the scoped admin's Model.
    def save_model(self, request: HttpRequest, obj: Workflow, form: WorkflowForm, change: bool) -> None:  # type: ignore[override]
        check_account(request, obj)  # the form offers only the user's accounts; this is the last word
        data = form.cleaned_data
        trigger = {
            "type": data["trigger_type"],
            "event": data.get("trigger_event") or "",
            "tag": data.get("trigger_tag") or "",
            "filter": data.get("trigger_filter") or [],
        }
        service = WorkflowService()
        if change:
            saved = service.update(
                workflow_id=obj.pk,
                name=data["name"],
                description=data.get("description") or "",
                trigger=trigger,
                reenrollment=data["reenrollment"],
            )
        else:
            saved = service.create(
                account_id=data["account"].pk,
                name=data["name"],
                description=data.get("description") or "",
                trigger=trigger,
                reenrollment=data["reenrollment"],
            )
        obj.pk = saved.pk
        obj._state.adding = False
        obj._state.db = saved._state.db
        for field in ("status", "created_at", "updated_at", "trigger_filter"):
            setattr(obj, field, getattr(saved, field))

    def save_related(self, request: HttpRequest, form: WorkflowForm, formsets: list, change: bool) -> None:
        for formset in formsets:
            if isinstance(formset, StepFormSet):
                WorkflowService().update(workflow_id=form.instance.pk, steps=formset.steps())
            # The service wrote the steps; tell the admin's change message there is nothing more.
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []

    def response_change(self, request: HttpRequest, obj: Workflow) -> HttpResponse:
        if "_publish" in request.POST:
            self._publish_one(request, obj)
            return HttpResponseRedirect(request.path)
        return super().response_change(request, obj)

    def response_add(self, request: HttpRequest, obj: Workflow, post_url_continue: str | None = None) -> HttpResponse:
        if "_publish" in request.POST:
            self._publish_one(request, obj)
            return HttpResponseRedirect(reverse("admin:workflows_workflow_change", args=[obj.pk]))
        return super().response_add(request, obj, post_url_continue)

    def _publish_one(self, request: HttpRequest, workflow: Workflow) -> None:
        try:
            version = WorkflowService().publish(workflow_id=workflow.pk, published_by_id=request.user.pk)
        except WorkflowValidationError as exc:
            for error in exc.errors:
                self.message_user(request, f"Not published: {error}", messages.ERROR)
        except WorkflowDomainError as exc:
            self.message_user(request, f"Not published: {exc}", messages.ERROR)
        else:
            self.message_user(request, f"Published “{workflow}” as version {version.number}.", messages.SUCCESS)

    # --- actions -------------------------------------------------------------------------------
    @admin.action(description="Publish selected workflows (freeze the draft as a new version)", permissions=["change"])
    def publish(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        for workflow in queryset:
            self._publish_one(request, workflow)

    @admin.action(description="Pause selected workflows (no new runs)", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._apply(request, queryset, WorkflowService().pause, "paused")

    @admin.action(description="Activate selected paused workflows", permissions=["change"])
    def activate(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._apply(request, queryset, WorkflowService().activate, "activated")

    @admin.action(description="Archive selected workflows", permissions=["change"])
    def archive(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._apply(request, queryset, WorkflowService().archive, "archived")

    @admin.action(description="Restore selected archived workflows as drafts", permissions=["change"])
    def restore(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._apply(request, queryset, WorkflowService().restore, "restored")

    @admin.action(description="Start a run for a contact…", permissions=["start"])
    def start_run(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one workflow to start a run of.", messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("admin:workflows_workflow_start", args=[queryset.get().pk]))

    def _apply(self, request: HttpRequest, queryset: QuerySet[Workflow], service, verb: str) -> None:
        done = 0
        for workflow in queryset:
            try:
                service(workflow_id=workflow.pk)
                done += 1
            except WorkflowDomainError as exc:
                self.message_user(request, f"{workflow}: {exc}", messages.WARNING)
        if done:
            self.message_user(request, f"{done} workflow(s) {verb}.", messages.SUCCESS)

    def has_start_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        return request.user.has_perm("workflows.add_workflowexecution") and self.role_allows(request, "start", obj)

    # --- start a run ------------------------------------------------------------------------
    def get_urls(self):
        return [
            path(
                "<int:workflow_id>/start/",
                self.admin_site.admin_view(self.start_run_view),
                name="workflows_workflow_start",
            ),
            *super().get_urls(),
        ]

    def start_run_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        # Another account's workflow is a 404, like a missing one; its contacts are then out of reach too.
        workflow = get_object_or_404(self.get_queryset(request), pk=workflow_id)
        if not self.has_view_permission(request, workflow) or not self.has_start_permission(request, workflow):
            return HttpResponseRedirect(reverse("admin:index"))
        form = StartRunForm(request.POST or None, workflow=workflow)
        if request.method == "POST" and form.is_valid():
            try:
                started = start_run(
                    workflow_id=workflow.pk,
                    contact_id=form.cleaned_data["contact"].pk,
                    trigger_data=form.cleaned_data["trigger_data"],
                    idempotency_key=form.cleaned_data["idempotency_key"] or None,
                    source=TriggerSource.MANUAL,
                    started_by_id=request.user.pk,
                )
            except WorkflowValidationError as exc:
                for error in exc.errors:
                    field = error.path if error.path in form.fields else None
                    form.add_error(field, error.reason if field else str(error))
            except (WorkflowDomainError, NotFound) as exc:
                form.add_error(None, str(exc))
            else:
                verb = "Started" if started.created else "This idempotency key already started"
                self.message_user(request, f"{verb} run {started.execution.pk}.", messages.SUCCESS)
                return HttpResponseRedirect(
                    reverse("admin:workflows_workflowexecution_change", args=[started.execution.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Start a run of “{workflow}”",
            "workflow": workflow,
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/workflows/workflow/start_run.html", context)


# --- runs --------------------------------------------------------------------------------------
class ExecutionLogInline(admin.TabularInline):
    model = ExecutionLog
    extra = 0
    can_delete = False
    ordering = ("id",)
    fields = (
        "step_index",
        "step_name",
        "action_type",
        "attempt_number",
        "outcome",
        "started_at",
        "duration_ms",
        "error_category",
        "error_details",
        "response",
    )
    readonly_fields = fields

    @admin.display(description="response data")
    def response(self, entry: ExecutionLog) -> str:
        shown = shown_json(entry.response_data)  # stored redacted already; shown through the API's rule again
        return format_html("<code>{}</code>", json.dumps(shown, ensure_ascii=False)[:1000])

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WorkflowExecution)
class WorkflowExecutionAdmin(AccountScopedAdmin):
    inlines = [ExecutionLogInline]
    list_display = (
        "id",
        "workflow",
        "version_number",
        "contact",
        "status",
        "progress",
        "retry_count",
        "resume_at",
        "created_at",
        "completed_at",
    )
    list_filter = (
        "status",
        "trigger_source",
        ("workflow", admin.RelatedOnlyFieldListFilter),
        ("account", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("=id", "=idempotency_key", "contact__email", "workflow__name")
    list_select_related = ("workflow", "version", "contact")
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["pause_runs", "resume_runs", "cancel_runs", "retry_runs"]
    account_roles = {"operate": Permission.RUN_WORKFLOWS}
    change_form_template = "admin/workflows/workflowexecution/change_form.html"
    fields = (
        "id",
        "account",
        "workflow",
        "version",
        "contact",
        "status",
        "paused_from",
        "current_step_index",
        "step_count",
        "retry_count",
        "resume_at",
        "last_error_category",
        "last_error",
        "idempotency_key",
        "trigger_source",
        "trigger_event",
        "parent",
        "depth",
        "created_by",
        "created_at",
        "started_at",
        "completed_at",
        "updated_at",
        "context",
        "next_job_id",
    )
    readonly_fields = fields

    @admin.display(description="version")
    def version_number(self, execution: WorkflowExecution) -> str:
        return f"v{execution.version.number}"

    @admin.display(description="step")
    def progress(self, execution: WorkflowExecution) -> str:
        return f"{min(execution.current_step_index + 1, execution.step_count)} / {execution.step_count}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # runs start from a workflow ("Start a run"), through start_run

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a run's history is kept; erasing its contact erases it

    # --- pause / resume / cancel / retry -----------------------------------------------------
    def has_operate_permission(self, request: HttpRequest, obj: WorkflowExecution | None = None) -> bool:
        """Runs are never edited in the admin, but whoever may change them, in a role that runs workflows, may
        pause, resume, cancel, retry."""
        return request.user.has_perm("workflows.change_workflowexecution") and self.role_allows(request, "operate", obj)

    @admin.action(description="Pause selected runs", permissions=["operate"])
    def pause_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution]) -> None:
        self._apply(request, queryset, pause_run, "paused")

    @admin.action(description="Resume selected paused runs", permissions=["operate"])
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution]) -> None:
        self._apply(request, queryset, resume_run, "resumed")

    @admin.action(description="Cancel selected runs", permissions=["operate"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution]) -> None:
        self._apply(request, queryset, cancel_run, "cancelled")

    @admin.action(description="Retry selected failed runs (from the failed step)", permissions=["operate"])
    def retry_runs(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution]) -> None:
        self._apply(request, queryset, retry_run, "retried")

    def _apply(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution], service, verb: str) -> None:
        done = 0
        for execution_id in queryset.values_list("pk", flat=True):
            try:
                service(execution_id=execution_id)
                done += 1
            except (IllegalExecutionTransition, NotFound) as exc:
                self.message_user(request, f"run {execution_id}: {exc}", messages.WARNING)
        if done:
            self.message_user(request, f"{done} run(s) {verb}.", messages.SUCCESS)

    def get_urls(self):
        return [
            path(
                "<uuid:execution_id>/operate/<str:operation>/",
                self.admin_site.admin_view(self.operate_view),
                name="workflows_workflowexecution_operate",
            ),
            *super().get_urls(),
        ]

    def operate_view(self, request: HttpRequest, execution_id: Any, operation: str) -> HttpResponse:
        """The change page's buttons: POST pause / resume / cancel / retry for one run."""
        target = reverse("admin:workflows_workflowexecution_change", args=[execution_id])
        operations = RUN_OPERATIONS
        execution = self.get_queryset(request).filter(pk=execution_id).only("pk", "account_id").first()
        if execution is None:
            raise Http404("No such run.")  # another account's run, like a missing one
        if request.method != "POST" or operation not in operations:
            return HttpResponseRedirect(target)
        if not self.has_view_permission(request) or not self.has_operate_permission(request, execution):
            self.message_user(request, "You may not change runs.", messages.ERROR)
            return HttpResponseRedirect(target)
        try:
            operations[operation](execution_id=execution_id)
        except (IllegalExecutionTransition, NotFound) as exc:
            self.message_user(request, str(exc), messages.WARNING)
        else:
            done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled", "retry": "retried"}[operation]
            self.message_user(request, f"Run {done}.", messages.SUCCESS)
        return HttpResponseRedirect(target)
