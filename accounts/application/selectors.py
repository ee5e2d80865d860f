"""Account reads."""

import re
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
