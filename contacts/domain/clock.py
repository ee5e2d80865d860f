"""The contact's clock: which time zone "9:00 for this contact" is read in, and where that zone came from.

A contact may have its own `time_zone` (an IANA name, set through the API, the admin, an import or an
`update_contact` step). When it has none, its phone number often says where it lives: `+33 6...` is in
France, `+1 212...` in New York. That holds only when the number's country or region has exactly one zone
(`+1 800...` or a Russian mobile span many, and then the number says nothing); otherwise the account's zone
is the contact's. The rule is `resolve_time_zone`; the phone lookup is a port (`ZonesForPhone`), given by
the application from a phone-metadata library, so this module stays plain Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from contacts.domain.model import ContactError

MAX_TIME_ZONE_LENGTH = 64
DEFAULT_ZONE = "UTC"

# A phone number -> the IANA zones its country or region spans (empty when unknown).
ZonesForPhone = Callable[[str], Sequence[str]]


class ClockSource(StrEnum):
    """Where a contact's zone came from: its own field, its phone number, or its account."""

    CONTACT = "contact"
    PHONE = "phone"
    ACCOUNT = "account"


@dataclass(frozen=True)
class ContactClock:
    time_zone: str  # an IANA name that zoneinfo knows
    source: ClockSource

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)

    def as_dict(self) -> dict[str, str]:
        return {"time_zone": self.time_zone, "source": self.source.value}


@lru_cache(maxsize=1)
def _known_zones() -> dict[str, str]:
    """Every zone name zoneinfo knows, by its lower-case spelling (so `europe/paris` is `Europe/Paris`)."""
    names = {*available_timezones(), "UTC"}
    return {name.lower(): name for name in names}


def known_time_zone(name: str) -> str | None:
    """The canonical spelling of a zone name zoneinfo knows, or None."""
    if not isinstance(name, str) or not name.strip():
        return None
    found = _known_zones().get(name.strip().lower())
    if found is None:
        return None
    try:
        ZoneInfo(found)
    except (ZoneInfoNotFoundError, ValueError):  # listed but unreadable (a broken tzdata install)
        return None
    return found


def normalize_time_zone(value: object, field: str = "time_zone") -> str:
    """A contact's own zone as stored: "" (none: derived) or an IANA name in its canonical spelling.
    Anything else is refused naming the field."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ContactError(field, "must be a time zone name such as Europe/Paris, or empty")
    if not value.strip():
        return ""
    if len(value) > MAX_TIME_ZONE_LENGTH:
        raise ContactError(field, f"must be at most {MAX_TIME_ZONE_LENGTH} characters")
    found = known_time_zone(value)
    if found is None:
        raise ContactError(field, f"{value.strip()[:64]!r} is not an IANA time zone name (e.g. Europe/Paris, UTC)")
    return found


def phone_time_zone(phone: str, zones_for_phone: ZonesForPhone) -> str | None:
    """The one zone the number's country or region has; None when it has several, or none is known."""
    if not phone or not phone.startswith("+"):
        return None  # without its country code a number says nothing of where it rings
    zones = {zone for zone in zones_for_phone(phone) if known_time_zone(zone) == zone}
    return zones.pop() if len(zones) == 1 else None


def resolve_time_zone(*, own: str, phone: str, account_time_zone: str, zones_for_phone: ZonesForPhone) -> ContactClock:
    """The contact's zone: its own; else its phone number's when that is unambiguous; else the account's (UTC
    when even that is unusable)."""
    mine = known_time_zone(own) if own else None
    if mine is not None:
        return ContactClock(mine, ClockSource.CONTACT)
    from_phone = phone_time_zone(phone, zones_for_phone)
    if from_phone is not None:
        return ContactClock(from_phone, ClockSource.PHONE)
    return ContactClock(known_time_zone(account_time_zone) or DEFAULT_ZONE, ClockSource.ACCOUNT)
