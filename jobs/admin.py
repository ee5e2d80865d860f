"""Operators' view of the queue. Actions call the same services as the API."""

from django import forms
from django.contrib import admin, messages

from accounts.admin_scoping import AccountScopedAdmin
from jobs.application.operations import JobConflict, job_cancel, job_retry
from jobs.application.schedules import schedule_problems
from jobs.domain.errors import stored_error
from jobs.domain.schedule import next_tick
from jobs.domain.states import IllegalJobTransition
from jobs.infrastructure.clock import database_now
from jobs.infrastructure.models import Job, Schedule


@admin.register(Job)
class JobAdmin(AccountScopedAdmin):  # jobs of no account (system jobs) are the superusers' alone
    list_display = (
        "id",
        "handler",
        "queue",
        "status",
        "priority",
        "attempt_number",
        "max_attempts",
        "run_at",
        "account",
        "created_at",
    )
    list_filter = ("status", "queue", "handler")
    search_fields = ("=id", "handler", "unique_key", "error_message", "worker_id")
    ordering = ("-created_at",)
    date_hierarchy = "created_at"
    actions = ["retry_jobs", "cancel_jobs"]
    list_select_related = ("account",)
    show_full_result_count = False

    def get_fields(self, request, obj=None):
        # The error as the stored-error rule shows it, whatever the row holds (written before a rule, or by SQL).
        fields = [f.name if f.name != "error_message" else "last_error" for f in Job._meta.fields]
        if not request.user.is_superuser:
            fields.remove("payload")  # payloads (and what handlers kept) may carry personal data
            fields.remove("result")
        return fields

    @admin.display(description="last error")
    def last_error(self, obj: Job) -> str:
        return stored_error(obj.error_message) or "-"

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Retry selected jobs (dead, failed or retrying)")
    def retry_jobs(self, request, queryset):
        self._apply(request, queryset, job_retry, "retried")

    @admin.action(description="Cancel selected jobs (pending or retrying)")
    def cancel_jobs(self, request, queryset):
        self._apply(request, queryset, job_cancel, "cancelled")

    def _apply(self, request, queryset, service, verb: str) -> None:
        done, refused = 0, []
        for job in queryset.only("id"):
            try:
                service(job_id=job.pk)
                done += 1
            except (IllegalJobTransition, JobConflict) as exc:
                refused.append(f"{job.pk}: {exc}")
        if done:
            self.message_user(request, f"{done} job(s) {verb}.", messages.SUCCESS)
        for line in refused[:20]:
            self.message_user(request, line, messages.WARNING)


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = ["name", "cron", "timezone", "handler", "payload", "queue", "priority", "enabled"]

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
