"""Operators' view of the queue. Actions call the same services as the API."""

from collections.abc import Callable, Iterable
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join

from accounts.admin_scoping import AccountScopedAdmin, StorableJSONField
from accounts.domain.roles import Permission
from jobs.application.operations import JobConflict, job_cancel, job_retry
from jobs.application.schedules import schedule_problems
from jobs.domain.ids import uuid7_floor
from jobs.domain.states import (
    ATTEMPTS_EXHAUSTED,
    EXPIRED,
    EXPIRED_ERROR_PREFIX,
    PERMANENT,
    IllegalJobTransition,
    JobStatus,
    dead_letter_reason,
)
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.database import is_split
from jobs.infrastructure.models import Job, Schedule
from kernel.cron import next_tick
from kernel.failures import stored_error

# What a job carries, as links from its page: other apps append a function job -> [(label, url)], so the
# queue links to (say) the workflow run a step's job moves without knowing workflows.
job_links: list[Callable[[Job], list[tuple[str, str]]]] = []


def jobs_shown_to(request: HttpRequest, admin_site: admin.AdminSite, jobs: Iterable[Job]) -> list[Job]:
    """The jobs this request may see on this admin site (another app's page that lists the jobs it carried)."""
    job_admin = admin_site.get_model_admin(Job)
    return [job for job in jobs if job_admin.has_view_permission(request, job)]


class DeadLetterReasonFilter(admin.SimpleListFilter):
    """Dead letters by why they gave up (jobs.domain.states.dead_letter_reason)."""

    title = "dead letter reason"
    parameter_name = "dead_letter_reason"

    def lookups(self, request, model_admin):
        return [(EXPIRED, "expired"), (ATTEMPTS_EXHAUSTED, "attempts exhausted"), (PERMANENT, "permanent")]

    def queryset(self, request, queryset):
        expired = {"status": JobStatus.DEAD, "error_message__startswith": EXPIRED_ERROR_PREFIX}
        if self.value() == EXPIRED:
            return queryset.filter(**expired)
        if self.value() == ATTEMPTS_EXHAUSTED:
            return queryset.filter(status=JobStatus.DEAD).exclude(error_message__startswith=EXPIRED_ERROR_PREFIX)
        if self.value() == PERMANENT:
            return queryset.filter(status=JobStatus.FAILED)
        return queryset


class CreatedFilter(admin.SimpleListFilter):
    """Jobs by age: a range of the primary key (ids are uuid7, made at enqueue), so a filter over millions of
    rows reads only the rows it shows. It replaces a date hierarchy on created_at, which has no index."""

    title = "created"
    parameter_name = "created"
    AGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}

    def lookups(self, request, model_admin):
        return [
            ("1h", "in the last hour"),
            ("24h", "in the last 24 hours"),
            ("7d", "in the last 7 days"),
            ("30d", "in the last 30 days"),
            ("older", "more than 30 days ago"),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() in self.AGES:
            return queryset.filter(pk__gte=uuid7_floor(now - self.AGES[self.value()]))
        if self.value() == "older":
            return queryset.filter(pk__lt=uuid7_floor(now - self.AGES["30d"]))
        return queryset


@admin.register(Job)
class JobAdmin(AccountScopedAdmin):  # jobs of no account (system jobs) are the superusers' alone
    """Members whose role may see the account's jobs (as in the API) see them; retrying and cancelling jobs
    is the operators' (superusers'), as the API's operator endpoints are."""

    list_display = (
        "id",
        "handler",
        "queue",
        "status",
        "dead_letter_reason",
        "priority",
        "attempt_number",
        "max_attempts",
        "run_at",
        "expires_at",
        "account",
        "created",
    )
    list_filter = ("status", DeadLetterReasonFilter, CreatedFilter, "queue", "handler")
    search_fields = ("=id", "handler", "unique_key", "error_message", "worker_id")
    # Newest first by id (uuid7, made at enqueue): the primary key serves it, and there is no index on
    # created_at (each index costs every claim and completion a write, issue 15), hence no date hierarchy.
    ordering = ("-id",)
    actions = ["retry_jobs", "cancel_jobs"]

    show_full_result_count = False
    account_roles = {"view": Permission.VIEW_JOBS}  # "operate" is not listed: the superusers' alone

    def get_list_select_related(self, request):
        return () if is_split() else ("account",)  # no join into another database

    def get_fields(self, request, obj=None):
        # The error as the stored-error rule shows it, whatever the row holds (written before a rule, or by SQL).
        fields = ["carries", *[f.name if f.name != "error_message" else "last_error" for f in Job._meta.fields]]
        fields.insert(fields.index("status") + 1, "dead_letter_reason")
        if not request.user.is_superuser:
            fields.remove("payload")  # payloads (and what handlers kept) may carry personal data
            fields.remove("result")
        return fields

    @admin.display(description="carries")
    def carries(self, job: Job) -> str:
        links = [link for provider in job_links for link in provider(job)]
        if not links:
            return "—"
        return format_html_join(", ", '<a href="{1}">{0}</a>', links)

    @admin.display(description="created at", ordering="id")
    def created(self, obj: Job):
        return obj.created_at

    @admin.display(description="dead letter reason")
    def dead_letter_reason(self, obj: Job) -> str:
        return dead_letter_reason(obj.status, obj.error_message) or "-"

    @admin.display(description="last error")
    def last_error(self, obj: Job) -> str:
        return stored_error(obj.error_message) or "-"

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_operate_permission(self, request):
        return request.user.is_superuser

    @admin.action(description="Retry selected jobs (dead, failed or retrying)", permissions=["operate"])
    def retry_jobs(self, request, queryset):
        self._apply(request, queryset, job_retry, "retried")

    @admin.action(description="Cancel selected jobs (pending or retrying)", permissions=["operate"])
    def cancel_jobs(self, request, queryset):
        self._apply(request, queryset, job_cancel, "cancelled")

    def _apply(self, request, queryset, service, verb: str) -> None:
        done, refused = 0, []
        # Ids only: `only("id")` would defer the account the changelist's select_related joins (a FieldError).
        for job_id in queryset.values_list("pk", flat=True):
            try:
                service(job_id=job_id)
                done += 1
            except (IllegalJobTransition, JobConflict) as exc:
                refused.append(f"{job_id}: {exc}")
        if done:
            self.message_user(request, f"{done} job(s) {verb}.", messages.SUCCESS)
        for line in refused[:20]:
            self.message_user(request, line, messages.WARNING)


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = ["name", "cron", "timezone", "handler", "payload", "queue", "priority", "enabled"]
        field_classes = {"payload": StorableJSONField}  # NaN or 1e400 would fail in jsonb as a 500

    def clean(self):
        data = super().clean()
        if not self.errors:
            problems = schedule_problems(
                cron=data["cron"],
                handler=data["handler"],
                payload=data.get("payload"),
                timezone=data.get("timezone") or "UTC",
            )
            for field, message in problems.items():
                self.add_error(field, message)
        return data


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Schedules belong to no account: they run for the whole installation, so only superusers see them."""

    form = ScheduleForm
    list_display = (
        "name",
        "cron",
        "timezone",
        "handler",
        "queue",
        "enabled",
        "next_run_at",
        "last_run_at",
        "missed_ticks",
    )
    readonly_fields = ("missed_ticks",)
    list_filter = ("enabled",)
    search_fields = ("name", "handler")

    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def save_model(self, request, obj, form, change):
        if not change or {"cron", "timezone"} & set(form.changed_data):
            obj.next_run_at = next_tick(obj.cron, database_now(), obj.timezone)
        super().save_model(request, obj, form, change)
