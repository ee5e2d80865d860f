"""Account use cases."""

from typing import cast

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from accounts.domain.errors import AccountError
from accounts.domain.roles import Role
from accounts.infrastructure.models import Account, Membership

_SLUG_MAX = cast(int, Account._meta.get_field("slug").max_length)
_NAME_MAX = cast(int, Account._meta.get_field("name").max_length)


def _free_slug(base: str) -> str:
    """`base`, or `base-2`, `base-3`... : the first not taken."""
    candidate, n = base, 1
    while Account.objects.filter(slug=candidate).exists():
        n += 1
        suffix = f"-{n}"
        candidate = base[: _SLUG_MAX - len(suffix)] + suffix
    return candidate


@transaction.atomic
def account_create(*, name: str, owner_id: int, slug: str | None = None) -> Account:
    """A new account with `owner_id` as its owner. The slug comes from the name unless given.

    A slug derived from the name is made unique (`acme-2`); a slug given
    explicitly must be free, because someone chose it on purpose.
    """
    name = name.strip()
    if not name:
        raise AccountError("name", "must not be blank")
    if len(name) > _NAME_MAX:
        raise AccountError("name", f"must be at most {_NAME_MAX} characters")
    owner = get_user_model().objects.filter(pk=owner_id).first()
    if owner is None:
        raise AccountError("owner", f"no user with id {owner_id}")
    if slug is not None:
        if slug != slugify(slug) or not slug or len(slug) > _SLUG_MAX:
            raise AccountError("slug", f"must be lowercase letters, digits and hyphens, at most {_SLUG_MAX}")
        if Account.objects.filter(slug=slug).exists():
            raise AccountError("slug", f"{slug!r} is taken")
        chosen = slug
    else:
        chosen = _free_slug(slugify(name)[:_SLUG_MAX].strip("-") or "account")
    try:
        with transaction.atomic():
            account = Account.objects.create(name=name, slug=chosen)
    except IntegrityError:  # taken between the check and the insert
        raise AccountError("slug", f"{chosen!r} is taken") from None
    Membership.objects.create(account=account, user=owner, role=Role.OWNER)
    return account


def account_lock(*, account_id: int) -> None:
    """Lock the account's row until the caller's transaction ends: what another app counts per account (a
    limit on its rows) is then decided by one transaction at a time."""
    list(Account.objects.select_for_update().filter(pk=account_id).values_list("pk", flat=True))
