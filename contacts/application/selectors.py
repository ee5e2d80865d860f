"""Contact reads, always within one account."""

from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet

from contacts.domain.model import normalize_tag
from contacts.infrastructure.models import Contact
from contacts.infrastructure.queries import distinct_custom_fields, distinct_tags, having_tag


def contact_get(*, account_id: int, contact_id: int) -> Contact:
    """The account's contact; Contact.DoesNotExist for another account's, exactly as for a missing one."""
    return _with_account_zone(Contact.objects).get(account_id=account_id, pk=contact_id)


def _with_account_zone(query: Any) -> QuerySet[Contact]:
    """Each contact with its account's zone (`account_time_zone`), read in the same query: what its clock falls
    back to (contacts.application.clock)."""
    return query.annotate(account_time_zone=F("account__time_zone"))


def contact_list(
    *,
    account_id: int,
    tag: str | None = None,
    email: str | None = None,
    phone: str | None = None,
    unsubscribed: bool | None = None,
    sms_opted_out: bool | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> QuerySet[Contact]:
    """Newest first. `tag` is normalized as tags are (ContactError if it cannot be a tag); email is case-insensitive."""
    query = _with_account_zone(Contact.objects.filter(account_id=account_id)).order_by("-created_at", "-id")
    if tag is not None:
        query = having_tag(query, normalize_tag(tag))
    if email is not None:
        query = query.filter(email__iexact=email.strip())
    if phone is not None:
        query = query.filter(phone=phone.strip())
    if unsubscribed is not None:
        query = query.filter(unsubscribed=unsubscribed)
    if sms_opted_out is not None:
        query = query.filter(sms_opted_out=sms_opted_out)
    if created_after is not None:
        query = query.filter(created_at__gte=created_after)
    if created_before is not None:
        query = query.filter(created_at__lt=created_before)
    return query


def account_tags(*, account_id: int, limit: int = 1000) -> list[str]:
    """Every tag in use in the account (for tag pickers), alphabetical."""
    return distinct_tags(account_id, limit)


def account_custom_fields(*, account_id: int, limit: int = 200) -> list[str]:
    """Every custom field name in use in the account (for the personalisation picker), alphabetical."""
    return distinct_custom_fields(account_id, limit)


def with_tag(queryset: QuerySet[Contact], tag: str) -> QuerySet[Contact]:
    """`queryset` cut to the contacts carrying `tag` (normalized first; ContactError if it cannot be a tag)."""
    return having_tag(queryset, normalize_tag(tag))
