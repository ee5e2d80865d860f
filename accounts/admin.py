from django.contrib import admin, messages

from accounts.admin_scoping import AccountScopedAdmin
from accounts.application.tokens import api_token_revoke
from accounts.domain.roles import Permission
from accounts.infrastructure.models import Account, ApiToken, AuditEvent, Membership


class MembershipInline(admin.TabularInline):
    """Who belongs to an account, and in what role: the superusers' to change.

    A member who could edit this could make themselves owner (their API tokens take the membership's
    role) or add any user of any tenant to the account; staff see the members, read-only.
    """

    model = Membership
    extra = 0
    autocomplete_fields = ["user"]

    def has_add_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_add_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)


@admin.register(Account)
class AccountAdmin(AccountScopedAdmin):
    """A staff user sees the accounts they are a member of and, as owner or admin, renames them; creating and
    deleting accounts and setting their limits is the superusers'."""

    list_display = ("name", "slug", "max_concurrent_executions", "max_concurrent_jobs", "created_at")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]
    account_roles = {"change": Permission.MANAGE_ACCOUNT}

    def get_readonly_fields(self, request, obj=None):
        limits = () if request.user.is_superuser else ("max_concurrent_executions", "max_concurrent_jobs")
        return (*super().get_readonly_fields(request, obj), *limits)

    def has_add_permission(self, request):
        return request.user.is_superuser and super().has_add_permission(request)


@admin.register(ApiToken)
class ApiTokenAdmin(AccountScopedAdmin):  # operator tokens (no account) are the superusers' alone
    """Issued by `manage.py create_api_token` (the secret is printed once); here seen and revoked."""

    list_display = ("prefix", "name", "user", "account", "created_at", "last_used_at", "revoked_at")
    list_filter = (("account", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("prefix", "name", "user__username", "account__slug")
    list_select_related = ("user", "account")
    fields = ("prefix", "name", "user", "account", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke_tokens"]
    account_roles = {"revoke": Permission.MANAGE_ACCOUNT}

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_revoke_permission(self, request, obj=None):
        """Revoking changes a token: Django's change permission, and a role that manages the account."""
        return request.user.has_perm("accounts.change_apitoken") and self.role_allows(request, "revoke", obj)

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke_tokens(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        for token_id in ids:
            api_token_revoke(token_id=token_id)
        self.message_user(request, f"{len(ids)} token(s) revoked.", messages.SUCCESS)


@admin.register(AuditEvent)
class AuditEventAdmin(AccountScopedAdmin):
    """The audit log, read-only: each export of contacts (who, when, how many, which format). Seen by the
    superusers and, for their accounts, by staff with `accounts.view_auditevent` whose role manages the account."""

    list_display = ("created_at", "account", "actor_name", "action", "detail")
    list_filter = ("action", ("account", admin.RelatedOnlyFieldListFilter))
    search_fields = ("actor_name", "action")
    list_select_related = ("account",)
    fields = ("created_at", "account", "actor", "actor_name", "action", "detail")
    readonly_fields = fields
    account_roles = {"view": Permission.MANAGE_ACCOUNT}

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
