"""Account reads."""

from accounts.infrastructure.models import Account


def account_by_ref(ref: str) -> Account | None:
    """An account named by id (all digits) or slug, as operators type it."""
    ref = ref.strip()
    if ref.isdigit():
        return Account.objects.filter(pk=int(ref)).first() if len(ref) <= 18 else None
    return Account.objects.filter(slug=ref).first()
