"""The phone number's time zones, from Google's libphonenumber metadata (the `phonenumbers` package).

The adapter behind `contacts.domain.clock.ZonesForPhone`. The metadata knows, per country and per region
prefix, which zones a number may ring in: `+1 212` is New York's alone, `+1 800` spans the continent. It is
maintained with every numbering plan change, which a table of our own would not be.
"""

from __future__ import annotations

from functools import lru_cache

import phonenumbers
from phonenumbers import timezone as phone_timezone

_UNKNOWN = "Etc/Unknown"  # the library's answer when the number says nothing


@lru_cache(maxsize=65536)
def zones_for_phone(phone: str) -> tuple[str, ...]:
    """The zones an E.164 number may ring in; () when it cannot be parsed or says nothing. Cached: a step
    that reads the contact's clock asks for the same numbers again and again, and a lookup costs tens of µs."""
    try:
        number = phonenumbers.parse(phone, None)
    except phonenumbers.NumberParseException:
        return ()
    zones = phone_timezone.time_zones_for_number(number)
    return tuple(zone for zone in zones if zone != _UNKNOWN)
