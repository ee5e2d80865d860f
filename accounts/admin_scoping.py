"""The Django admin's tenant fence: a staff user sees and acts for the accounts they are a member of, as far
as their role in each allows.

Three things decide what a staff user may do with a row, each checked on the server:
- Django's model permissions, and an admin's own `has_<x>_permission`, say which parts of the admin they use;
- membership says for which accounts: another account's row looks exactly like a missing one;
- the role they hold in the row's account (`accounts/domain/roles.py`, the table the API obeys) says whether
  they may do it there. Each AccountScopedAdmin names in `account_roles` the role permission that each of its
  permission names needs ("add", "change", "delete", and its actions' own, such as "revoke"); a name it does
  not list is the superusers' alone. Viewing needs `Permission.VIEW` (every role) unless it says otherwise.

Every action declares its permission (`@admin.action(permissions=[...])`, a system check refuses one that
does not): Django offers and runs it only for whoever has it, and the fence here hands it only the selected
rows of accounts where the user's role allows it. Superusers see and do everything. Rows of no account
(operator tokens, system jobs, schedules) are the superusers' alone.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.core import checks
from django.core.exceptions import PermissionDenied
from django.db.models import JSONField, Model, QuerySet
from django.http import HttpRequest

from accounts.application.selectors import admin_account_roles
from accounts.domain.roles import Permission, role_allows
from accounts.infrastructure.models import Account
from kernel.storable_json import find_unstorable


class StorableJSONField(forms.JSONField):
    """The admin's JSON fields: what the database would refuse is a form error on the field, not a 500."""

    def to_python(self, value: Any) -> Any:
        converted = super().to_python(value)
        found = find_unstorable(converted)
        if found is not None:
            where = f"{found.path}: " if found.path else ""
            raise forms.ValidationError(f"{where}{found.reason}", code="unstorable")
        return converted


def account_roles(request: HttpRequest) -> dict[int, str] | None:
    """The user's role in each of their accounts, read once per request (None: a superuser, every account)."""
    if not hasattr(request, "_relay_admin_account_roles"):
        request._relay_admin_account_roles = admin_account_roles(request.user)  # type: ignore[attr-defined]
    return request._relay_admin_account_roles  # type: ignore[attr-defined]


def allowed_account_ids(request: HttpRequest) -> frozenset[int] | None:
    """The accounts the user is a member of, in any role (None: every account)."""
    roles = account_roles(request)
    return None if roles is None else frozenset(roles)


def role_account_ids(request: HttpRequest, permission: Permission | None) -> frozenset[int] | None:
    """The accounts where the user's role holds `permission` (None: every account). A permission of None is
    the superusers' alone: no account, for anyone else."""
    roles = account_roles(request)
    if roles is None:
        return None
    if permission is None:
        return frozenset()
    return frozenset(account_id for account_id, role in roles.items() if role_allows(role, permission))


def scope(
    queryset: QuerySet,
    request: HttpRequest,
    account_field: str = "account",
    permission: Permission | None = Permission.VIEW,
) -> QuerySet:
    """`queryset` cut to the rows of the accounts where the user's role holds `permission` (`account_field`
    leads from the model to Account)."""
    ids = role_account_ids(request, permission)
    if ids is None:
        return queryset
    lookup = "pk__in" if queryset.model is Account else f"{account_field}__in"
    return queryset.filter(**{lookup: ids})


def account_id_of(obj: Model, account_field: str = "account") -> int | None:
    """The id of the account a row belongs to (None: a row of no account)."""
    if isinstance(obj, Account):
        return obj.pk
    *path, last = account_field.split("__")
    row: Any = obj
    for part in path:
        row = getattr(row, part, None)
        if row is None:
            return None
    return getattr(row, f"{last}_id", None)


class AccountScopedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose rows, foreign-key choices, saves and actions are fenced to the user's accounts and
    to what their role there allows."""

    account_field = "account"
    # Permission name (Django's "view", "add", "change", "delete", or an action's own) -> what the user's role
    # must hold in the row's account. A name not listed is the superusers' alone ("view" defaults to VIEW).
    account_roles: dict[str, Permission] = {}
    # What jsonb cannot store (NaN, 1e400, NUL) is a form error on the field, as the API's parser refuses it.
    formfield_overrides = {JSONField: {"form_class": StorableJSONField}}

    def role_needed(self, name: str) -> Permission | None:
        if name == "view":
            return self.account_roles.get("view", Permission.VIEW)
        return self.account_roles.get(name)

    def role_allows(self, request: HttpRequest, name: str, obj: Model | None = None) -> bool:
        """Whether the user's role allows `name` on `obj`'s account, or (no obj) in at least one account."""
        ids = role_account_ids(request, self.role_needed(name))
        if ids is None:
            return True
        if obj is None:
            return bool(ids)
        return account_id_of(obj, self.account_field) in ids

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope(super().get_queryset(request), request, self.account_field, self.role_needed("view"))

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return super().has_view_permission(request, obj) and self.role_allows(request, "view", obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and self.role_allows(request, "add")

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return super().has_change_permission(request, obj) and self.role_allows(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self.role_allows(request, "delete", obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        queryset = getattr(field, "queryset", None)
        if field is not None and queryset is not None:
            if queryset.model is Account:  # the accounts one may write rows for
                writable = (role_account_ids(request, self.role_needed(n)) for n in ("add", "change"))
                ids = functools.reduce(_union, writable)
                field.queryset = queryset if ids is None else queryset.filter(pk__in=ids)
            else:
                field.queryset = scope_choices(queryset, request)
        return field

    def save_form(self, request: HttpRequest, form: Any, change: bool) -> Model:
        """The account a form names is the one its role is checked in, whatever the subclass saves through."""
        obj = super().save_form(request, form, change)
        check_account(request, obj, self.account_field)
        if not self.role_allows(request, "change" if change else "add", obj):
            raise PermissionDenied("Your role in this account does not allow this.")
        return obj

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        check_account(request, obj, self.account_field)
        super().save_model(request, obj, form, change)

    # --- actions ---------------------------------------------------------------------------------
    def get_actions(self, request: HttpRequest, action_location: Any = ActionLocation.CHANGE_LIST) -> dict:
        actions = super().get_actions(request, action_location=action_location)
        return {
            name: dataclasses.replace(action, func=_fenced(action.func))
            for name, action in actions.items()
            if action is not None
        }

    def rows_allowed(self, request: HttpRequest, queryset: QuerySet, names: tuple[str, ...]) -> QuerySet:
        """The rows of `queryset` in accounts where the role allows one of `names` (as Django, any one will do)."""
        allowed: frozenset[int] | None = frozenset()
        for name in names:
            if getattr(self, f"has_{name}_permission")(request):
                allowed = _union(allowed, role_account_ids(request, self.role_needed(name)))
        if allowed is None:
            return queryset
        lookup = "pk__in" if queryset.model is Account else f"{self.account_field}__in"
        return queryset.filter(**{lookup: allowed})

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        errors = super().check(**kwargs)
        for action in self.actions or ():
            func = action if callable(action) else getattr(type(self), action, None)
            names = getattr(func, "allowed_permissions", None)
            if func is not None and not names:
                errors.append(
                    checks.Error(
                        f"The admin action {getattr(func, '__name__', action)!r} declares no permission.",
                        hint="Use @admin.action(permissions=[...]) and list the role it needs in account_roles.",
                        obj=type(self),
                        id="accounts.E001",
                    )
                )
            for name in names or ():
                if not hasattr(self, f"has_{name}_permission"):
                    errors.append(
                        checks.Error(
                            f"The admin action {getattr(func, '__name__', action)!r} needs has_{name}_permission().",
                            obj=type(self),
                            id="accounts.E002",
                        )
                    )
        return errors


def _union(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    return None if a is None or b is None else a | b


def _fenced(func: Any) -> Any:
    """An action that runs on the selected rows the user's role allows it for, and says what it left."""
    if getattr(func, "_relay_fenced", False):
        return func

    @functools.wraps(func)
    def fenced(modeladmin: AccountScopedAdmin, request: HttpRequest, queryset: QuerySet) -> Any:
        names = tuple(getattr(func, "allowed_permissions", ()) or ())
        if names:
            allowed = modeladmin.rows_allowed(request, queryset, names)
        else:  # undeclared (the system check names it): the superusers' alone
            allowed = queryset if request.user.is_superuser else queryset.none()
        left = queryset.count() - allowed.count() if allowed is not queryset else 0
        if left:
            modeladmin.message_user(
                request,
                f"{left} selected row(s) belong to accounts where your role does not allow this; left unchanged.",
                messages.WARNING,
            )
            if not allowed.exists():
                return None
        return func(modeladmin, request, allowed)

    fenced._relay_fenced = True  # type: ignore[attr-defined]
    return fenced


def scope_choices(queryset: QuerySet, request: HttpRequest) -> QuerySet:
    """Choices of a foreign key: accounts, and rows that belong to an account, only the user's."""
    model = queryset.model
    if model is Account:
        return scope(queryset, request)
    if any(f.name == "account" for f in model._meta.get_fields()):
        return scope(queryset, request, "account")
    return queryset


def check_account(request: HttpRequest, obj: Model, account_field: str = "account") -> None:
    """Refuses to write a row for an account the user is not a member of (the form's choices already hide it)."""
    ids = allowed_account_ids(request)
    if ids is None:
        return
    if account_id_of(obj, account_field) not in ids:
        raise PermissionDenied("You are not a member of this account.")
