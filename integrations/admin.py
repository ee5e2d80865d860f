"""Webhook signing secrets in the admin: never shown whole; rotated by an action that calls the service."""

from django.contrib import admin, messages

from accounts.admin_scoping import AccountScopedAdmin
from accounts.domain.roles import Permission
from integrations.application.secrets import webhook_secret_rotate
from integrations.domain.signing import mask_secret
from integrations.infrastructure.models import WebhookSigningSecret


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
