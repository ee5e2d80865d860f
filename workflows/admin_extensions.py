"""What the engine adds to other apps' admin pages, through the extension points they offer, so no app's admin
learns another: a contact's runs on its page (`contacts.admin.contact_page_panels`), "enroll them into a
workflow" after an import (`contacts.admin_imports.import_follow_ups`), a step job's link to its run
(`jobs.admin.job_links`).

Registered by `register()`, which WorkflowsConfig.ready() calls: nothing wires itself at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse

from contacts.admin import contact_page_panels
from contacts.admin_imports import ImportFollowUp, import_follow_ups
from contacts.infrastructure.models import Contact
from jobs.public.admin import job_links
from workflows.application.enrollments import enrollment_job
from workflows.application.runs.moves import RESUME_HANDLER, STEP_HANDLER
from workflows.application.selectors import deferred_sends, execution_list
from workflows.domain.workflow import WorkflowStatus
from workflows.infrastructure.models import Workflow

if TYPE_CHECKING:
    from workflows.admin import WorkflowAdmin


def contact_runs_panel(request: HttpRequest, contact: Contact) -> str:
    """A contact's runs, on the contact's page."""
    if not request.user.has_perm("workflows.view_workflowexecution"):
        return ""
    runs = execution_list(account_id=contact.account_id, contact_id=contact.pk)[:50]
    deferred = deferred_sends(account_id=contact.account_id, contact_id=contact.pk)
    return render_to_string(
        "admin/workflows/contact_runs.html", {"runs": runs, "contact": contact, "deferred": deferred}, request
    )


def _enroll_field(account_id: int) -> forms.Field:
    workflows = Workflow.objects.filter(account_id=account_id, status=WorkflowStatus.ACTIVE).order_by("name")
    return forms.ModelChoiceField(
        queryset=workflows,
        required=False,
        empty_label="— don't enroll them —",
        label="Then enroll them into",
        help_text="Every imported contact starts this workflow, at the pace the account's limit of runs allows.",
    )


def _enroll_jobs(workflow: Workflow, *, import_id: int, account_id: int, user_id: int | None) -> list:
    return [enrollment_job(account_id=account_id, workflow_id=workflow.pk, import_id=import_id, started_by_id=user_id)]


def _enroll_refusal(request: HttpRequest, workflow: Workflow) -> str:
    """Enrolling starts a run for each imported contact: the user must be allowed to start this workflow's runs,
    by the same rule as its "Start a run" page (Django's permission, and their role in its account)."""
    workflow_admin = cast("WorkflowAdmin", admin.site.get_model_admin(Workflow))
    if workflow_admin.has_start_permission(request, workflow):
        return ""
    return (
        f"Enrolling them starts a run of “{workflow.name}” for each contact, and you may not start runs in "
        f"{workflow.account.name}: import without enrolling, or ask an owner or admin of the account."
    )


ENROLL = ImportFollowUp(name="enroll", field=_enroll_field, jobs=_enroll_jobs, refusal=_enroll_refusal)


def run_links(job: Any) -> list[tuple[str, str]]:
    """A workflow step's job links to the run it carries."""
    run_id = (job.payload or {}).get("execution_id") if isinstance(job.payload, dict) else None
    if job.handler not in (STEP_HANDLER, RESUME_HANDLER) or not run_id:
        return []
    return [(f"Run {run_id}", reverse("admin:workflows_workflowexecution_change", args=[run_id]))]


def register() -> None:
    """Add the engine's panels, follow-up and links; once however often it is called."""
    if contact_runs_panel not in contact_page_panels:
        contact_page_panels.append(contact_runs_panel)
    if ENROLL not in import_follow_ups:
        import_follow_ups.append(ENROLL)
    if run_links not in job_links:
        job_links.append(run_links)
