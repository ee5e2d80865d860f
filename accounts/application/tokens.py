"""API token use cases: issue, revoke, and recognise a presented token."""

from datetime import timedelta
from typing import cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from accounts.domain.errors import AccountError
from accounts.domain.roles import Role
from accounts.domain.tokens import ApiCaller, hash_token, looks_like_token, mint_token
from accounts.infrastructure.models import Account, ApiToken, Membership

# last_used_at is a hint for people ("is this token still in use?"), not an
# audit log: writing it at most once a minute keeps reads from becoming writes.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_account_for(*, user_id: int, account_slug: str | None) -> int | None:
    """The account a new token acts for: the one named, else the user's only one.

    A superuser who belongs to no account gets an operator token (None).
    """
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise AccountError("user", f"no user with id {user_id}")
    if account_slug:
        account = Account.objects.filter(slug=account_slug).first()
        if account is None:
            raise AccountError("account", f"no account with slug {account_slug!r}")
        return account.pk
    slugs = list(
        Membership.objects.filter(user_id=user_id).order_by("account__slug").values_list("account__slug", flat=True)
    )
    if len(slugs) == 1:
        return Account.objects.get(slug=slugs[0]).pk
    if not slugs and user.is_superuser:
        return None
    if not slugs:
        raise AccountError("account", f"{user} belongs to no account; add a membership first")
    raise AccountError("account", f"{user} belongs to several accounts; name one of: {', '.join(slugs)}")


@transaction.atomic
def api_token_create(*, user_id: int, account_id: int | None, name: str = "") -> tuple[ApiToken, str]:
    """Issue a token; returns it with its secret, which is never stored and cannot be shown again."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise AccountError("user", f"no user with id {user_id}")
    if not user.is_active:
        raise AccountError("user", f"{user} is not active")
    if len(name) > cast(int, ApiToken._meta.get_field("name").max_length):
        raise AccountError("name", "must be at most 100 characters")
    if account_id is None:
        if not user.is_superuser:
            raise AccountError("account", "only a superuser may hold a token that acts for no account")
    elif not user.is_superuser and not Membership.objects.filter(account_id=account_id, user_id=user_id).exists():
        raise AccountError("account", f"{user} is not a member of this account")
    minted = mint_token()
    token = ApiToken.objects.create(
        user=user, account_id=account_id, name=name, prefix=minted.prefix, key_hash=minted.key_hash
    )
    return token, minted.secret


@transaction.atomic
def api_token_revoke(*, token_id: int) -> ApiToken:
    """Revoke at once; revoking twice keeps the first time."""
    token = ApiToken.objects.select_for_update().get(pk=token_id)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_token_authenticate(*, secret: str) -> tuple[AbstractBaseUser, ApiCaller] | None:
    """The user and caller a presented secret stands for, or None if it stands for nobody.

    Nobody: unknown, revoked, an inactive user, a user no longer a member of
    the token's account, or an operator token whose user is no longer a superuser.
    One query; at most one cheap UPDATE a minute per token.
    """
    if not looks_like_token(secret):
        return None
    role = Membership.objects.filter(account_id=OuterRef("account_id"), user_id=OuterRef("user_id")).values("role")[:1]
    token = (
        ApiToken.objects.select_related("user")
        .annotate(member_role=Subquery(role))
        .filter(key_hash=hash_token(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    user = token.user
    if token.account_id is None and not user.is_superuser:
        return None
    if token.account_id is not None and token.member_role is None and not user.is_superuser:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    caller = ApiCaller(
        token_id=token.pk,
        token_prefix=token.prefix,
        user_id=user.pk,
        account_id=token.account_id,
        role=Role(token.member_role) if token.member_role else None,
        is_superuser=user.is_superuser,
    )
    return user, caller
