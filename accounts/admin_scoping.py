"""The Django admin's tenant fence: a staff user sees and acts for the accounts they are a member of.

Django's model permissions say *what* a staff user may do (view, change, start runs); membership says
*for which accounts*. Every admin whose rows belong to an account mixes in `AccountScopedAdmin`: its
changelist, change pages, actions and custom views read only the member's accounts (another account's
row looks exactly like a missing one), foreign keys offer only their rows, and a save for another
account is refused. Superusers see every account. Rows of no account (operator tokens, system jobs,
schedules) are the superusers' alone.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from accounts.application.selectors import admin_account_ids
from accounts.infrastructure.models import Account


def allowed_account_ids(request: HttpRequest) -> frozenset[int] | None:
    """`admin_account_ids` for this request's user, read once per request (None: every account)."""
    if not hasattr(request, "_relay_admin_account_ids"):
        request._relay_admin_account_ids = admin_account_ids(request.user)  # type: ignore[attr-defined]
    return request._relay_admin_account_ids  # type: ignore[attr-defined]


def scope(queryset: QuerySet, request: HttpRequest, account_field: str = "account") -> QuerySet:
    """`queryset` cut to the rows of the user's accounts (`account_field` leads from the model to Account)."""
    ids = allowed_account_ids(request)
    if ids is None:
        return queryset
    lookup = "pk__in" if queryset.model is Account else f"{account_field}__in"
    return queryset.filter(**{lookup: ids})


class AccountScopedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose rows, foreign-key choices and saves are fenced to the user's accounts."""

    account_field = "account"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope(super().get_queryset(request), request, self.account_field)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        queryset = getattr(field, "queryset", None)
        if field is not None and queryset is not None:
            field.queryset = scope_choices(queryset, request)
        return field

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        check_account(request, obj, self.account_field)
        super().save_model(request, obj, form, change)


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
    account_id = obj.pk if isinstance(obj, Account) else getattr(obj, f"{account_field.split('__')[0]}_id", None)
    if account_id not in ids:
        raise PermissionDenied("You are not a member of this account.")
