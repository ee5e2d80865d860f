"""Account reads."""

import re

from accounts.infrastructure.models import Account

_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only ("³".isdigit() is True), and within a bigint


def account_by_ref(ref: str) -> Account | None:
    """An account named by id (all digits) or slug, as operators type it."""
    ref = ref.strip()
    if _ID.fullmatch(ref):
        return Account.objects.filter(pk=int(ref)).first()
    if ref.isdigit():
        return None  # digits, but not an id that can exist
    return Account.objects.filter(slug=ref).first()
