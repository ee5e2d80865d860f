"""Contact reads, always within one account (but an inbound SMS's, which matches a phone in every account)."""

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, OuterRef, QuerySet, Subquery

from contacts.domain.model import ConsentChannel, ConsentSource, ConsentState, normalize_tag
from contacts.infrastructure.models import ConsentChange, Contact, Event
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


# --- what other apps' use cases read of contacts (they never query the contacts' tables themselves) ---------


@dataclass(frozen=True)
class Recipient:
    """A contact a message is for: who, and what it consented to."""

    contact_id: int
    consent: ConsentState


def contact_exists(*, contact_id: Any, account_id: int | None = None) -> bool:
    """Whether the contact is there (within the account, when one is given)."""
    contacts = Contact.objects.filter(pk=contact_id)
    return (contacts if account_id is None else contacts.filter(account_id=account_id)).exists()


def contact_email(*, contact_id: Any) -> str | None:
    """The contact's email address ("" when it has none); None when there is no such contact."""
    return Contact.objects.filter(pk=contact_id).values_list("email", flat=True).first()


def recipient(*, account_id: int, contact_id: Any = None, email: str = "") -> Recipient | None:
    """The account's contact named by id, else the first with this email address (either case); None if none."""
    contacts = Contact.objects.filter(account_id=account_id)
    if contact_id is not None:
        contacts = contacts.filter(pk=contact_id)
    else:
        contacts = contacts.filter(email__iexact=email.strip()).order_by("pk")
    row = contacts.values_list("pk", "unsubscribed", "sms_opted_out").first()
    if row is None:
        return None
    return Recipient(row[0], ConsentState(unsubscribed=row[1], sms_opted_out=row[2]))


def contact_locked_for_sending(*, account_id: int | None, contact_id: Any) -> dict[str, Any] | None:
    """The contact as a message to it needs it (address, consent, clock), its row locked until the caller's
    transaction ends: the sending door (integrations.application.outbound) holds it across the ledger's cap
    check, so concurrent senders to one contact count one after another. `FOR NO KEY UPDATE`: rows that only
    reference the contact (its events, runs, ledger rows) are not blocked. None if there is no such contact."""
    contacts = Contact.objects.select_for_update(no_key=True).filter(pk=contact_id)
    if account_id is not None:
        contacts = contacts.filter(account_id=account_id)
    row = contacts.values("account_id", "email", "phone", "time_zone", "unsubscribed", "sms_opted_out").first()
    return dict(row) if row is not None else None


def contact_row(*, account_id: int, contact_id: Any) -> dict[str, Any] | None:
    """The account's contact as templates read it (id, email, phone, names, tags, custom fields); None if none."""
    row = (
        Contact.objects.filter(account_id=account_id, pk=contact_id)
        .values("id", "email", "phone", "first_name", "last_name", "tags", "custom_fields")
        .first()
    )
    return dict(row) if row is not None else None


def contact_rows(*, account_id: int, columns: Sequence[str], chunk_size: int = 2000) -> Iterator[dict[str, Any]]:
    """Every contact of the account, in id order, as rows of these columns, streamed."""
    return Contact.objects.filter(account_id=account_id).order_by("pk").values(*columns).iterator(chunk_size)


def contact_ids_by_phone(*, phones: Collection[str]) -> list[int]:
    """The contacts of every account whose phone is one of these spellings, in id order (an inbound SMS)."""
    return list(Contact.objects.filter(phone__in=list(phones)).order_by("pk").values_list("pk", flat=True))


def sms_opted_out_by_keyword(*, contact_ids: Collection[int]) -> set[int]:
    """Those of these contacts whose SMS opt-out stands because of an inbound keyword (their latest SMS consent
    change came from one): what a keyword may opt back in."""
    latest = ConsentChange.objects.filter(contact=OuterRef("pk"), channel=ConsentChannel.SMS).order_by(
        "-created_at", "-id"
    )
    rows = Contact.objects.filter(pk__in=list(contact_ids), sms_opted_out=True).annotate(
        source=Subquery(latest.values("source")[:1])
    )
    return set(rows.filter(source=ConsentSource.INBOUND_SMS).values_list("pk", flat=True))


def contact_events(*, contact_id: int, names: Collection[str], run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, data) of the contact's stored events of these names that a run caused (`data.run`)."""
    rows = Event.objects.filter(contact_id=contact_id, name__in=list(names), data__run=str(run_id))
    return list(rows.values_list("name", "data"))
