"""Account reads."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from accounts.infrastructure.models import Account, Membership

_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only ("³".isdigit() is True), and within a bigint


def account_by_ref(ref: str) -> Account | None:
    """An account named by id (all digits) or slug, as operators type it."""
    ref = ref.strip()
    if _ID.fullmatch(ref):
        return Account.objects.filter(pk=int(ref)).first()
    if ref.isdigit():
        return None  # digits, but not an id that can exist
    return Account.objects.filter(slug=ref).first()


def admin_account_ids(user: AbstractBaseUser | AnonymousUser) -> frozenset[int] | None:
    """The accounts a staff user may see and act for in the Django admin: those they are a member of.

    None means every account (a superuser is the superadmin, above all accounts). An anonymous or inactive
    user gets no account.
    """
    roles = admin_account_roles(user)
    return None if roles is None else frozenset(roles)


def admin_account_roles(user: object) -> dict[int, str] | None:
    """The role a staff user holds in each account they are a member of (None: a superuser, every account)."""
    if getattr(user, "is_superuser", False) and getattr(user, "is_active", False):
        return None
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return {}
    return dict(
        Membership.objects.filter(user_id=cast(int, getattr(user, "pk", None))).values_list("account_id", "role")
    )


def job_limits() -> Iterable[tuple[int, int]]:
    """Every account's (id, max_concurrent_jobs), streamed: what the queue copies beside its jobs."""
    return Account.objects.order_by().values_list("pk", "max_concurrent_jobs").iterator(chunk_size=5000)


# --- what other apps read of an account (they never query the accounts' tables themselves) ----------------


@dataclass(frozen=True)
class AccountLimits:
    """An account's name and the limits it runs under (the dashboard's usage table)."""

    id: int
    name: str
    max_concurrent_executions: int
    max_concurrent_jobs: int


def account_exists(account_id: int) -> bool:
    return Account.objects.filter(pk=account_id).exists()


def account_from_email(account_id: int) -> str:
    """The From of the account's email; blank when it sets none (or it is gone): DEFAULT_FROM_EMAIL then."""
    return Account.objects.filter(pk=account_id).values_list("from_email", flat=True).first() or ""


def account_time_zone(account_id: int) -> str:
    """The account's zone (UTC when it has none, or the account is gone)."""
    zone = Account.objects.filter(pk=account_id).values_list("time_zone", flat=True).first()
    return zone or "UTC"


def accounts_with_limits(*, account_ids: frozenset[int] | None, limit: int = 200) -> list[AccountLimits]:
    """The accounts (None: every one) by name, at most `limit`, with their limits."""
    accounts = Account.objects.order_by("name")
    if account_ids is not None:
        accounts = accounts.filter(pk__in=account_ids)
    rows = accounts.values_list("pk", "name", "max_concurrent_executions", "max_concurrent_jobs")[:limit]
    return [AccountLimits(*row) for row in rows]
