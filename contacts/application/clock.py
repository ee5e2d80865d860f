"""The contact's clock, resolved: its own zone, else its phone number's, else its account's.

    contact_clock(contact)                          # reads the account's zone (one query)
    contact_clock(row, account_time_zone="UTC")     # a row or a Contact, when the caller has the account's zone

The rule is `contacts.domain.clock.resolve_time_zone`; the phone lookup is the phonenumbers adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accounts.application.selectors import account_time_zone
from contacts.domain.clock import ContactClock, resolve_time_zone
from contacts.infrastructure.models import Contact
from contacts.infrastructure.phone_zones import zones_for_phone


def contact_clock(contact: Contact | Mapping[str, Any], *, account_time_zone: str | None = None) -> ContactClock:
    """The zone a contact's dates and times are read in, and where it came from (contact, phone, account)."""
    account_id: Any
    if isinstance(contact, Contact):
        own, phone, account_id = contact.time_zone, contact.phone, contact.account_id
    else:
        own, phone, account_id = contact.get("time_zone") or "", contact.get("phone") or "", contact.get("account_id")
    if account_time_zone is None:
        account_time_zone = _account_zone(account_id)
    return resolve_time_zone(own=own, phone=phone, account_time_zone=account_time_zone, zones_for_phone=zones_for_phone)


def _account_zone(account_id: Any) -> str:
    return account_time_zone(int(account_id)) if account_id is not None else "UTC"
