"""Webhook signing secrets in the admin (never shown whole; rotated by an action that calls the service), the
account's sending settings (send windows, frequency caps: integrations.admin_forms), and the ledger of messages
sent, read-only."""

from django.contrib import admin, messages
from django.db.models import Model

from accounts.admin_scoping import AccountScopedAdmin, check_account
from accounts.domain.roles import Permission
from integrations.admin_forms import SendingSettingsForm, account_fieldsets, in_force_lines
from integrations.application.secrets import webhook_secret_rotate
from integrations.application.sending_rules import SendingSettingsInvalid, sending_settings_set
from integrations.domain.signing import mask_secret
from integrations.infrastructure.models import OutboundMessage, SendingSettings, WebhookSigningSecret


@admin.register(WebhookSigningSecret)
class WebhookSigningSecretAdmin(AccountScopedAdmin):
    list_display = ("account", "masked_secret", "created_at", "rotated_at")
    search_fields = ("account__name", "account__slug")
    fields = ("account", "masked_secret", "created_at", "rotated_at")
    readonly_fields = fields
    actions = ["rotate"]
    account_roles = {"rotate": Permission.MANAGE_ACCOUNT}

    @admin.display(description="secret")
    def masked_secret(self, obj: WebhookSigningSecret) -> str:
        return mask_secret(obj.secret)

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # created on first use, or by `manage.py webhook_secret`

    def has_rotate_permission(self, request, obj=None) -> bool:
        """Rotating changes the secret: Django's change permission, and a role that manages the account."""
        return request.user.has_perm("integrations.change_webhooksigningsecret") and self.role_allows(
            request, "rotate", obj
        )

    @admin.action(
        description="Rotate the signing secret (the old one keeps signing during the grace period)",
        permissions=["rotate"],
    )
    def rotate(self, request, queryset) -> None:
        for record in queryset:
            webhook_secret_rotate(account_id=record.account_id)
        self.message_user(
            request,
            f"Rotated {queryset.count()} secret(s). Give receivers the new secret: manage.py webhook_secret <slug>.",
            messages.SUCCESS,
        )


@admin.register(SendingSettings)
class SendingSettingsAdmin(AccountScopedAdmin):
    """An account's send windows and frequency caps, for whoever builds its workflows (a marketer, an admin, the
    owner). Saved through `sending_settings_set`, the same service as everywhere; the form puts each problem the
    rules find on the field it is about."""

    form = SendingSettingsForm
    list_display = ("account", "in_force", "updated_at")
    readonly_fields = ("in_force",)
    account_roles = {"add": Permission.MANAGE_WORKFLOWS, "change": Permission.MANAGE_WORKFLOWS}

    def get_fieldsets(self, request, obj=None):
        sets = account_fieldsets()
        if obj is not None:
            sets.insert(1, ("What is in force", {"fields": ["in_force"]}))
        return sets

    def get_readonly_fields(self, request, obj=None):
        return ("account", "in_force") if obj is not None else ("in_force",)

    @admin.display(description="in force")
    def in_force(self, obj: SendingSettings) -> str:
        """What a marketing message of each channel obeys now, in words."""
        from django.utils.html import format_html_join

        return format_html_join("", "<div>{}</div>", ((line,) for line in in_force_lines(obj.account_id)))

    def save_model(self, request, obj: Model, form, change: bool) -> None:
        assert isinstance(obj, SendingSettings)
        check_account(request, obj)
        try:
            saved = sending_settings_set(
                account_id=obj.account_id,
                send_windows=obj.send_windows,
                frequency_caps=obj.frequency_caps,
                when_capped=obj.when_capped,
            )
        except SendingSettingsInvalid as exc:  # the form checked it already; a race with another editor
            self.message_user(request, str(exc), messages.ERROR)
            return
        obj.pk = saved.pk


@admin.register(OutboundMessage)
class OutboundMessageAdmin(AccountScopedAdmin):
    """The ledger, read-only: what each message did (sent, deferred until when and why, refused why), where it
    came from, and each status it went through. Written by the door alone; nobody adds, edits or deletes a row
    here (a contact's rows go with the contact)."""

    list_display = ("created_at", "account", "channel", "purpose", "status", "contact", "step_key", "reason")
    list_filter = ("status", "channel", "purpose", ("account", admin.RelatedOnlyFieldListFilter))
    search_fields = ("idempotency_key", "provider_message_id", "step_key")
    list_select_related = ("account", "contact")
    ordering = ("-created_at",)
    show_full_result_count = False  # the ledger grows with every message: no count(*) per page
    fields = (
        "idempotency_key",
        "account",
        "contact",
        "channel",
        "purpose",
        "address",
        "status",
        "reason",
        "rule",
        "code",
        "deferred_until",
        "workflow_id",
        "version_id",
        "run_id",
        "step_key",
        "split_path",
        "job_id",
        "provider",
        "provider_message_id",
        "provider_calls",
        "error",
        "history",
        "created_at",
        "updated_at",
        "sending_at",
        "sent_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
