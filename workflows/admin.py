"""The marketer's and operator's admin: build a workflow with its steps, publish it, start runs, watch their logs.

Thin: forms check input with the same domain validation the services use
(errors land on the field they name), saves and every action call
WorkflowService and the run use cases (workflows.application.runs). Fenced by account and role
(accounts.admin_scoping): a staff user sees, changes and starts runs of their accounts' workflows only, as far as
their role in each account allows.
Published versions and log rows show webhook credentials redacted, as the API does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from accounts.admin_scoping import AccountScopedAdmin, allowed_account_ids, check_account
from accounts.domain.roles import Permission
from accounts.infrastructure.models import Account
from contacts.infrastructure.models import Contact
from integrations.admin_forms import layer_fieldsets
from jobs.public.admin import jobs_shown_to
from jobs.public.operations import jobs_carrying
from kernel.failures import JobError
from workflows.admin_forms.context import BuilderContext, StepRef, builder_context
from workflows.admin_forms.steps import ACCOUNT_TAGS_LIST, STEP_FORMS, StepForm, StepFormSet, step_palette
from workflows.admin_forms.summary import decision_words, step_lines, waiting_words
from workflows.admin_forms.workflow import EVENT_LABELS, SENDING, WorkflowForm, goals_supported
from workflows.application.errors import NotFound
from workflows.application.previews import PreviewRefused, step_preview, step_send_test
from workflows.application.runs.operating import (
    RUN_OPERATIONS,
    Operator,
    cancel_run,
    pause_run,
    resume_run,
    retry_run,
)
from workflows.application.runs.starting import start_run
from workflows.application.selectors import has_unpublished_changes, run_timeline, workflow_versions
from workflows.application.stats import workflow_run_counts, workflow_step_counts
from workflows.application.workflows import WorkflowService
from workflows.domain.errors import IllegalExecutionTransition, WorkflowDomainError, WorkflowValidationError
from workflows.domain.execution import OPERATOR_MOVES, run_path
from workflows.domain.redaction import shown_context, shown_json, shown_step, shown_steps
from workflows.domain.version_diff import diff_versions
from workflows.domain.workflow import WorkflowStatus
from workflows.infrastructure.models import (
    ExecutionLog,
    TriggerSource,
    Workflow,
    WorkflowExecution,
    WorkflowStep,
    WorkflowVersion,
)


class WorkflowStepInline(admin.StackedInline):
    """The steps, each edited through the form of its action (admin_forms.steps), in one card per step."""

    model = WorkflowStep
    form = StepForm
    formset = StepFormSet
    extra = 0
    fields = ("position", "name", "action_type", "key", "next_key", "config_mode", "config_json")
    ordering = ("position", "id")
    template = "admin/workflows/workflow/steps_inline.html"
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
    fields = ("number", "created_at", "created_by", "trigger_type", "trigger_event", "reenrollment", "steps_shown")
    readonly_fields = fields
    ordering = ("-number",)
    verbose_name_plural = "published versions"

    @admin.display(description="steps")
    def step_names(self, version: WorkflowVersion) -> str:
        return " → ".join(s.get("name") or s.get("action_type", "?") for s in version.steps)

    @admin.display(description="steps as published")
    def steps_shown(self, version: WorkflowVersion) -> str:
        """The frozen steps in words, webhook URLs cut to their host and secret headers and body values hidden."""
        items = []
        for step in shown_steps(version.steps)[:100]:
            form = STEP_FORMS.get(step.get("action_type", ""))
            kind = form.label if form else step.get("action_type", "?")
            lines = step_lines(step.get("action_type", ""), step.get("config") or {})
            detail = "; ".join(f"{label}: {value}"[:160] for label, value in lines[:3])
            items.append((step.get("name") or kind, detail))
        return format_html_join("", "<div><strong>{}</strong> · {}</div>", items)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _step_refs(steps: Any) -> tuple[StepRef, ...]:
    """The saved draft's steps as the builder's step choices name them (the browser keeps them current)."""
    refs = []
    for number, step in enumerate(steps, start=1):
        form = STEP_FORMS.get(step.action_type)
        label = step.name or (form.label if form else step.action_type)
        refs.append(
            StepRef(key=getattr(step, "key", "") or f"step_{number}", label=label, action_type=step.action_type)
        )
    return tuple(refs)


def _recent_contacts(account_id: int | None) -> list[dict[str, Any]]:
    """The contacts a preview offers first (any other is found by email or id)."""
    if account_id is None:
        return []
    return [
        dict(row)
        for row in Contact.objects.filter(account_id=account_id).order_by("-id").values("pk", "email", "phone")[:50]
    ]


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
    list_display = ("name", "account", "status_badge", "trigger", "live_version", "unpublished_changes", "updated_at")
    list_filter = ("status", "trigger_type", ("account", admin.RelatedOnlyFieldListFilter))
    search_fields = ("name", "description", "trigger_event")
    readonly_fields = ("status", "current_version", "created_at", "updated_at", "who_enters", "again")
    fieldsets = (
        (None, {"fields": ("account", "name", "description", "track_email_engagement")}),
        (
            "Who enters",
            {
                "fields": (
                    "trigger_type",
                    "trigger_event",
                    "trigger_custom_event",
                    "trigger_tag",
                    "trigger_filter",
                    "reenrollment",
                )
            },
        ),
        *layer_fieldsets(SENDING, channels=True, title="When its messages may go (send windows and caps)"),
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

    @admin.display(description="who enters")
    def who_enters(self, workflow: Workflow) -> str:
        if workflow.trigger_type == "manual":
            return "Contacts started by hand, from this admin"
        if workflow.trigger_type == "api":
            return "Contacts your app starts through the API"
        event = EVENT_LABELS.get(workflow.trigger_event, f"the event {workflow.trigger_event}")
        tag = f" (tag {workflow.trigger_tag})" if workflow.trigger_tag else ""
        conditions = len(workflow.trigger_filter or [])
        only = f", if {conditions} condition{'s' if conditions != 1 else ''} hold" if conditions else ""
        return f"When {event[:1].lower() + event[1:]}{tag}{only}"

    @admin.display(description="can a contact enter again")
    def again(self, workflow: Workflow) -> str:
        return {
            "never": "No: each contact goes through once",
            "after_finish": "Yes, once their previous run has finished",
            "always": "Yes, even while a previous run is still going",
        }.get(workflow.reenrollment, workflow.reenrollment)

    @admin.display(description="live version")
    def live_version(self, workflow: Workflow) -> str:
        return f"v{workflow.current_version.number}" if workflow.current_version else "-"

    @admin.display(description="unpublished changes")
    def unpublished_changes(self, workflow: Workflow) -> str:
        if not has_unpublished_changes(workflow):
            return "—"
        return "yes: not live yet" if workflow.current_version is None else "yes: draft differs from the live version"

    @admin.display(description="status", ordering="status")
    def status_badge(self, workflow: Workflow) -> str:
        return format_html('<span class="relay-badge relay-badge-{}">{}</span>', workflow.status, workflow.status)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None):
        return super().changelist_view(request, {"title": "Workflows", **(extra_context or {})})

    def get_inlines(self, request: HttpRequest, obj: Workflow | None) -> list:
        """The published versions' table only once there is a version (the history page has them all)."""
        has_versions = obj is not None and obj.pk and obj.current_version_id is not None
        return [WorkflowStepInline, *([WorkflowVersionInline] if has_versions else [])]

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if isinstance(obj, Workflow) and obj.status == WorkflowStatus.ARCHIVED:
            return False  # archived workflows are read-only; restore one to edit it
        return super().has_change_permission(request, obj)

    def get_fieldsets(self, request: HttpRequest, obj: Workflow | None = None) -> Any:
        if obj is not None and not self.has_change_permission(request, obj):
            return (
                (None, {"fields": ("account", "name", "description", "status", "current_version")}),
                ("Who enters", {"fields": ("who_enters", "again")}),
            )
        fieldsets = super().get_fieldsets(request, obj)
        if goals_supported():
            fieldsets = (*fieldsets, ("Goals", {"fields": ("goals",), "classes": ("relay-goals",)}))
        return fieldsets

    # --- the builder's context: the account's tags, custom fields, time zone and events ----------
    def builder_for(self, request: HttpRequest, obj: Workflow | None) -> BuilderContext:
        cached = getattr(request, "_relay_builder", None)
        if cached is not None:
            return cached
        account = obj.account if obj is not None and obj.pk else self._account_being_added(request)
        builder = builder_context(account)
        if obj is not None and obj.pk:
            builder = replace(builder, steps=_step_refs(obj.steps.order_by("position", "id")))
        request._relay_builder = builder  # type: ignore[attr-defined]
        return builder

    def _account_being_added(self, request: HttpRequest) -> Account | None:
        """The account a new workflow is for: the one posted, else the user's only account."""
        accounts = self.get_queryset(request).model.account.field.related_model.objects.all()
        ids = allowed_account_ids(request)
        if ids is not None:
            accounts = accounts.filter(pk__in=ids)
        posted = request.POST.get("account") or request.GET.get("account")
        if posted and str(posted).isdigit():
            return accounts.filter(pk=int(posted)).first()
        return accounts.first() if accounts.count() == 1 else None

    def get_form(self, request: HttpRequest, obj: Workflow | None = None, change: bool = False, **kwargs: Any) -> Any:
        form_class = super().get_form(request, obj, change, **kwargs)
        builder = self.builder_for(request, obj)

        class WorkflowFormForAccount(form_class):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **inner: Any) -> None:
                super().__init__(*args, builder=builder, **inner)

        return WorkflowFormForAccount

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        account = self._account_being_added(request)
        if account is not None:
            initial.setdefault("account", str(account.pk))
        return initial

    def get_formset_kwargs(self, request: HttpRequest, obj: Any, inline: Any, prefix: str) -> dict[str, Any]:
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, WorkflowStepInline):
            kwargs["form_kwargs"] = {"builder": self.builder_for(request, obj)}
        return kwargs

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Workflow | None = None,
    ) -> HttpResponse:
        builder = self.builder_for(request, obj)
        context.update(
            builder=builder,
            builder_json={
                "variables": builder.variables(),
                "tags": list(builder.tags),
                "previewUrl": reverse("admin:workflows_workflow_preview"),
                "sendTestUrl": reverse("admin:workflows_workflow_send_test"),
                "accountId": builder.account_id,
                "workflowId": obj.pk if obj is not None else None,
                "stepKinds": {
                    key: {
                        "label": form.label,
                        "decides": form.decides,
                        "nextLabel": form.next_label,
                        "results": form.result_fields,  # [suffix, words, yes/no]: what later conditions may read
                    }
                    for key, form in STEP_FORMS.items()
                },
            },
            step_palette=step_palette(),
            may_start=self.has_start_permission(request, obj if obj is not None and obj.pk else None),
            account_tags_list=ACCOUNT_TAGS_LIST,
            live_version=obj.current_version if obj is not None else None,
            draft_differs=obj is not None and obj.pk and has_unpublished_changes(obj),
            preview_contacts=_recent_contacts(builder.account_id),
            readonly_steps=[
                {
                    "name": step.name,
                    "kind": STEP_FORMS[step.action_type].label if step.action_type in STEP_FORMS else step.action_type,
                    "lines": step_lines(step.action_type, shown_step(step.as_dict())["config"]),
                }
                for step in (obj.steps.order_by("position", "id") if obj is not None and obj.pk else [])
            ],
        )
        return super().render_change_form(request, context, add, change, form_url, obj)

    # --- saving through the service --------------------------------------------------------
    # This admin is registered for Workflow only: it narrows the scoped admin's Model.
    def save_model(self, request: HttpRequest, obj: Workflow, form: WorkflowForm, change: bool) -> None:  # type: ignore[override]
        check_account(request, obj)  # the form offers only the user's accounts; this is the last word
        data = form.cleaned_data
        trigger = form.trigger()
        service = WorkflowService()
        if change:
            saved = service.update(
                workflow_id=obj.pk,
                name=data["name"],
                description=data.get("description") or "",
                trigger=trigger,
                reenrollment=data["reenrollment"],
                track_email_engagement=data.get("track_email_engagement"),
                sending_rules=form.sending_rules,
            )
        else:
            saved = service.create(
                account_id=data["account"].pk,
                name=data["name"],
                description=data.get("description") or "",
                trigger=trigger,
                reenrollment=data["reenrollment"],
                track_email_engagement=data.get("track_email_engagement"),
                sending_rules=form.sending_rules,
            )
        obj.pk = saved.pk
        obj._state.adding = False
        obj._state.db = saved._state.db
        for field in ("status", "created_at", "updated_at", "trigger_filter"):
            setattr(obj, field, getattr(saved, field))

    def save_related(self, request: HttpRequest, form: WorkflowForm, formsets: list, change: bool) -> None:
        for formset in formsets:
            if isinstance(formset, StepFormSet):
                # Goals go with the steps: a goal may jump to a step the same save adds.
                goals: dict[str, Any] = {"goals": form.goal_list()} if "goals" in form.fields else {}
                WorkflowService().update(workflow_id=form.instance.pk, steps=formset.steps(), **goals)
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
            self.message_user(
                request, f"Published “{workflow}” as version {version.number}: new runs use it.", messages.SUCCESS
            )

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
            path(
                "<int:workflow_id>/versions/",
                self.admin_site.admin_view(self.versions_view),
                name="workflows_workflow_versions",
            ),
            path(
                "<int:workflow_id>/stats/",
                self.admin_site.admin_view(self.stats_view),
                name="workflows_workflow_stats",
            ),
            path("preview/", self.admin_site.admin_view(self.preview_view), name="workflows_workflow_preview"),
            path("send-test/", self.admin_site.admin_view(self.send_test_view), name="workflows_workflow_send_test"),
            *super().get_urls(),
        ]

    # --- version history and statistics -------------------------------------------------------------
    def _viewable(self, request: HttpRequest, workflow_id: int) -> Workflow:
        workflow = get_object_or_404(self.get_queryset(request), pk=workflow_id)  # another account's: 404
        if not self.has_view_permission(request, workflow):
            raise PermissionDenied
        return workflow

    def versions_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        """Every published version, and what changed between any two of them (or the draft)."""
        workflow = self._viewable(request, workflow_id)
        versions = list(workflow_versions(workflow_id=workflow.pk))
        shapes: dict[str, dict[str, Any]] = {
            str(v.number): {
                "trigger": v.trigger_dict(),
                "reenrollment": v.reenrollment,
                "steps": shown_steps(v.steps),
                "goals": getattr(v, "goals", None) or [],
            }
            for v in versions
        }
        draft: list[Mapping[str, Any]] = [s.as_dict() for s in workflow.steps.order_by("position", "id")]
        shapes["draft"] = {
            "trigger": workflow.trigger_dict(),
            "reenrollment": workflow.reenrollment,
            "steps": shown_steps(draft),
            "goals": getattr(workflow, "goals", None) or [],
        }
        live = str(workflow.current_version.number) if workflow.current_version else None
        newest = str(versions[0].number) if versions else "draft"
        default_a = str(versions[1].number) if len(versions) > 1 else (live or "draft")
        default_b = "draft" if has_unpublished_changes(workflow) and versions else newest
        a, b = request.GET.get("a", default_a), request.GET.get("b", default_b)
        if a not in shapes or b not in shapes:
            a, b = default_a, default_b
        context = {
            **self.admin_site.each_context(request),
            "title": f"Version history of “{workflow}”",
            "workflow": workflow,
            "opts": self.model._meta,
            "versions": versions,
            "live": live,
            "choices": [*shapes.keys()],
            "a": a,
            "b": b,
            "changes": diff_versions(shapes[a], shapes[b]),
        }
        return TemplateResponse(request, "admin/workflows/workflow/versions.html", context)

    def stats_view(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        workflow = self._viewable(request, workflow_id)
        now = timezone.now()
        windows = [("Last 24 hours", now - timedelta(hours=24)), ("Last 30 days", now - timedelta(days=30))]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Statistics of “{workflow}”",
            "workflow": workflow,
            "opts": self.model._meta,
            "windows": [
                {
                    "label": label,
                    "runs": workflow_run_counts(workflow_id=workflow.pk, since=since),
                    "steps": [
                        {
                            "counts": counts,
                            "key": counts.key,
                            "label": counts.name
                            or (STEP_FORMS[counts.action_type].label if counts.action_type in STEP_FORMS else ""),
                            "kind": STEP_FORMS[counts.action_type].label
                            if counts.action_type in STEP_FORMS
                            else counts.action_type,
                        }
                        for counts in workflow_step_counts(workflow_id=workflow.pk, since=since)
                    ],
                }
                for label, since in windows
            ],
        }
        return TemplateResponse(request, "admin/workflows/workflow/stats.html", context)

    # --- preview and test send (POST: the step card's own fields) ----------------------------------
    def _posted_step(self, request: HttpRequest) -> tuple[Account, StepForm, dict[str, Any] | None, int | None]:
        """The account, the step form as posted, its config (None when the form refused it) and the contact."""
        if request.method != "POST":
            raise Http404("POST the step's fields.")
        account_ids = allowed_account_ids(request)
        raw_account = request.POST.get("account", "")
        if not raw_account.isdigit() or (account_ids is not None and int(raw_account) not in account_ids):
            raise Http404("No such account.")
        account = get_object_or_404(Account, pk=int(raw_account))
        prefix = request.POST.get("step_prefix", "")
        if not prefix.startswith("steps-"):
            raise Http404("No step.")
        form = StepForm(request.POST, prefix=prefix, builder=builder_context(account))
        config = form.cleaned_data.get("config") if form.is_valid() else None
        raw_contact = request.POST.get("contact", "").strip()
        contacts = Contact.objects.filter(account_id=account.pk)
        if raw_contact.isdigit():
            contact = contacts.filter(pk=int(raw_contact)).first()
        elif raw_contact:
            contact = contacts.filter(email__iexact=raw_contact).first()
        else:
            contact = contacts.order_by("-id").first()
        return account, form, config, contact.pk if contact else None

    def preview_view(self, request: HttpRequest) -> JsonResponse:
        """The step as the contact would get it, as JSON: the builder puts each text in as text (contacts'
        data is never markup on this page) and the sanitised HTML part in a sandboxed frame."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        account, form, config, contact_id = self._posted_step(request)
        preview = None
        if config is None:
            chosen = form.chosen_form
            problems = [str(e) for errors in chosen.errors.values() for e in errors] if chosen else []
            problems = problems or ["Fix the step's settings first."]
        else:
            preview = step_preview(
                account_id=account.pk,
                action_type=form.cleaned_data["action_type"],
                config=config,
                contact_id=contact_id,
            )
            problems = preview.problems
        shown = preview.as_dict() if preview is not None and not problems else None
        return JsonResponse({"problems": problems, "preview": shown})

    def send_test_view(self, request: HttpRequest) -> JsonResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        account, form, config, contact_id = self._posted_step(request)
        if not self.role_allows(request, "change", account):  # a member whose role there builds no workflows
            raise PermissionDenied
        if config is None:
            return JsonResponse({"ok": False, "message": "Fix the step's settings first."}, status=400)
        try:
            result = step_send_test(
                account_id=account.pk,
                action_type=form.cleaned_data["action_type"],
                config=config,
                to=request.POST.get("to", ""),
                contact_id=contact_id,
            )
        except PreviewRefused as exc:
            return JsonResponse({"ok": False, "message": str(exc)}, status=400)
        except JobError as exc:
            return JsonResponse({"ok": False, "message": f"Not sent: {exc}"}, status=502)
        where = request.POST.get("to", "").strip()
        return JsonResponse({"ok": True, "message": f"Test sent to {where} ({result.provider})."})

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


class VersionFilter(admin.SimpleListFilter):
    title = "version"
    parameter_name = "version_number"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        numbers = (
            WorkflowVersion.objects.filter(executions__in=model_admin.get_queryset(request))
            .order_by("number")
            .values_list("number", flat=True)
            .distinct()[:50]
        )
        return [(str(n), f"v{n}") for n in numbers]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(version__number=int(value)) if value and value.isdigit() else queryset


@admin.register(WorkflowExecution)
class WorkflowExecutionAdmin(AccountScopedAdmin):
    inlines = []  # the change page's timeline shows every attempt (ExecutionLogInline stays for reuse)
    list_display = (
        "id",
        "workflow",
        "version_number",
        "contact",
        "status_badge",
        "progress",
        "retry_count",
        "resume_at",
        "created_at",
        "completed_at",
    )
    list_filter = (
        "status",
        ("workflow", admin.RelatedOnlyFieldListFilter),
        VersionFilter,
        "trigger_source",
        ("created_at", admin.DateFieldListFilter),
        ("account", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("=id", "=idempotency_key", "contact__email", "contact__phone", "workflow__name")
    search_help_text = "Search by the contact's email or phone, the workflow's name, or a run id."
    list_select_related = ("workflow", "version", "contact")
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["pause_runs", "resume_runs", "cancel_runs", "retry_runs"]
    account_roles = {"operate": Permission.RUN_WORKFLOWS}
    change_form_template = "admin/workflows/workflowexecution/change_form.html"
    _detail_fields = (
        "id",
        "account",
        "workflow",
        "version",
        "contact",
        "status",
        "paused_from",
        "current_step_index",
        "current_step_key",
        "path_taken",
        "end_reason",
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
        "run_context",
        "next_job_id",
    )
    readonly_fields = _detail_fields
    fieldsets = (("Details", {"fields": _detail_fields, "classes": ("collapse",)}),)

    @admin.display(description="context")
    def run_context(self, execution: WorkflowExecution) -> str:
        """The run's context without its steps' raw outputs (they may hold what a receiver answered, unredacted)."""
        return format_html("<pre>{}</pre>", json.dumps(shown_context(execution.context), indent=2, default=str))

    @admin.display(description="path")
    def path_taken(self, execution: WorkflowExecution) -> str:
        """The keys of the steps the run went through, in order."""
        return " → ".join(
            run_path(execution.context, execution.current_step_index, execution.step_count, execution.current_step_key)
        )

    @admin.display(description="version")
    def version_number(self, execution: WorkflowExecution) -> str:
        return f"v{execution.version.number}"

    def changelist_view(self, request: HttpRequest, extra_context: Any = None):
        return super().changelist_view(request, {"title": "Runs", **(extra_context or {})})

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None):
        execution = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if execution is not None:
            jobs = jobs_carrying(payload_key="execution_id", value=str(execution.pk))
            pending = next((j for j in jobs if j.status in ("pending", "retrying")), None)
            shown_jobs = jobs_shown_to(request, self.admin_site, jobs)  # to a role that may see jobs
            timeline = run_timeline(execution=execution)
            # A run waiting for an event: what, and until when (the wait's row; absent for a time wait).
            event_wait = getattr(execution, "event_wait", None) if execution.status == "waiting" else None
            if event_wait is not None:
                on = execution.version.steps[execution.current_step_index : execution.current_step_index + 1]
                kind = on[0].get("action_type", "") if on else ""
                extra["waiting_for"] = waiting_words(kind, event_wait.event, event_wait.match)
                extra["waiting_until"] = event_wait.timeout_at
            steps = execution.version.steps
            for step in timeline:
                form = STEP_FORMS.get(step.action_type)
                step.label = step.name or (form.label if form else step.action_type)
                config = shown_step(steps[step.index])["config"] if step.index < len(steps) else {}
                lines = step_lines(step.action_type, config)
                step.summary = f"{lines[0][0]}: {lines[0][1]}"[:140] if lines else ""
                step.decision_texts = [decision_words(d) for d in step.decisions]  # type: ignore[attr-defined]
                for attempt in step.attempts:
                    # stored redacted already; shown through the API's rule again (an attribute for the page only)
                    shown = json.dumps(shown_json(attempt.response_data), indent=2)[:4000]
                    attempt.shown_response = shown  # type: ignore[attr-defined]
            # A deferred step (a send window, a frequency cap): why it waits, in the rule's own words.
            deferred = next((step.deferred for step in timeline if step.state == "deferred"), "")
            extra.update(
                timeline=timeline,
                run_jobs=shown_jobs,
                deferred=deferred,
                retrying_at=pending.run_at
                if pending and execution.retry_count and execution.status == "queued" and not deferred
                else None,
                live=execution.status in ("queued", "active", "waiting") and not deferred,
                run_path=run_path(
                    execution.context, execution.current_step_index, execution.step_count, execution.current_step_key
                ),
                may_operate=self.has_operate_permission(request, execution),
                moves={move for move, states in OPERATOR_MOVES.items() if execution.status in states},
                title=f"Run of “{execution.workflow}” for {execution.contact}",
            )
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="status", ordering="status")
    def status_badge(self, execution: WorkflowExecution) -> str:
        return format_html('<span class="relay-badge relay-badge-{}">{}</span>', execution.status, execution.status)

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
        by = _operator(request)
        self._apply(request, queryset, lambda **kwargs: retry_run(**kwargs, by=by), "retried")

    def _apply(self, request: HttpRequest, queryset: QuerySet[WorkflowExecution], service, verb: str) -> None:
        """Each run through the service; one message with how many changed, and why the others did not."""
        done = 0
        refused: dict[str, int] = {}
        for execution_id in queryset.values_list("pk", flat=True):
            try:
                service(execution_id=execution_id)
                done += 1
            except (IllegalExecutionTransition, NotFound) as exc:
                reason = str(exc)
                refused[reason] = refused.get(reason, 0) + 1
        level = messages.SUCCESS if done and not refused else messages.WARNING
        why = "; ".join(f"{n} not: {reason}" for reason, n in sorted(refused.items(), key=lambda item: -item[1]))
        self.message_user(request, f"{done} run(s) {verb}." + (f" {why}." if why else ""), level)

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
            if operation == "retry":  # the run's history says who retried it (when that lifts the loop cap)
                retry_run(execution_id=execution_id, by=_operator(request))
            else:
                operations[operation](execution_id=execution_id)
        except (IllegalExecutionTransition, NotFound) as exc:
            self.message_user(request, str(exc), messages.WARNING)
        else:
            done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled", "retry": "retried"}[operation]
            self.message_user(request, f"Run {done}.", messages.SUCCESS)
        return HttpResponseRedirect(target)


def _operator(request: HttpRequest) -> Operator:
    """The admin user moving a run, as its history records them."""
    return Operator(user_id=request.user.pk, via="admin", name=request.user.get_username())
