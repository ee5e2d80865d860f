"""Queries of the integrations' tables that join another app's (a foreign key's other side)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from django.db.models import OuterRef, Subquery

from contacts.infrastructure.models import Contact
from integrations.infrastructure.models import SmsConversation


def contacts_with_last_text(
    *, phones: Collection[str], from_number: str
) -> list[tuple[int, int, datetime, datetime | None]]:
    """(contact id, account id, updated at, last texted at or None) of every contact whose phone is one of
    `phones`, in id order, with when Relay last texted it from `from_number` at that phone."""
    texted = SmsConversation.objects.filter(
        contact=OuterRef("pk"), from_number=from_number, to_number__in=list(phones)
    ).values("last_sent_at")[:1]
    rows = (
        Contact.objects.filter(phone__in=list(phones))
        .annotate(texted_at=Subquery(texted))
        .order_by("pk")
        .values_list("pk", "account_id", "updated_at", "texted_at")
    )
    return list(rows)
