"""The contact's clock: its own zone, else its phone number's when the number's region has one, else the
account's. The phone lookup is the real phonenumbers adapter (pure data, no network)."""

import pytest

from contacts.domain.clock import ClockSource, ContactClock, normalize_time_zone, resolve_time_zone
from contacts.domain.model import ContactError
from contacts.infrastructure.phone_zones import zones_for_phone


def clock(own="", phone="", account="Europe/Berlin") -> ContactClock:
    return resolve_time_zone(own=own, phone=phone, account_time_zone=account, zones_for_phone=zones_for_phone)


def test_the_contacts_own_zone_wins():
    assert clock(own="Asia/Tokyo", phone="+33612345678") == ContactClock("Asia/Tokyo", ClockSource.CONTACT)


@pytest.mark.parametrize(
    ("phone", "zone"),
    [
        ("+33612345678", "Europe/Paris"),  # France: one zone
        ("+12125550123", "America/New_York"),  # New York's area code
        ("+13105550123", "America/Los_Angeles"),  # Los Angeles's
        ("+262262123456", "Indian/Reunion"),  # an overseas department has its own country code
        ("+442079460000", "Europe/London"),
    ],
)
def test_a_phone_whose_region_has_one_zone_gives_it(phone, zone):
    assert clock(phone=phone) == ContactClock(zone, ClockSource.PHONE)


@pytest.mark.parametrize(
    "phone",
    [
        "+18005550123",  # toll-free: the whole continent
        "+79161234567",  # a Russian mobile: eleven zones
        "+61412345678",  # an Australian mobile: every state
        "+15550100000",  # 555: fictional, no region
        "2125550123",  # no country code: it says nothing of where it rings
        "",
    ],
)
def test_an_ambiguous_or_unknown_phone_falls_back_to_the_account(phone):
    assert clock(phone=phone) == ContactClock("Europe/Berlin", ClockSource.ACCOUNT)


def test_an_unusable_account_zone_is_utc():
    assert clock(account="") == ContactClock("UTC", ClockSource.ACCOUNT)
    assert clock(account="Nowhere/Land") == ContactClock("UTC", ClockSource.ACCOUNT)


def test_a_zone_is_stored_in_its_canonical_spelling_or_refused_naming_the_field():
    assert normalize_time_zone(" europe/paris ") == "Europe/Paris"
    assert normalize_time_zone("utc") == "UTC"
    assert normalize_time_zone("") == ""
    assert normalize_time_zone(None) == ""
    with pytest.raises(ContactError) as info:
        normalize_time_zone("Mars/Olympus_Mons")
    assert (info.value.field, info.value.reason) == (
        "time_zone",
        "'Mars/Olympus_Mons' is not an IANA time zone name (e.g. Europe/Paris, UTC)",
    )
    with pytest.raises(ContactError, match="at most 64"):
        normalize_time_zone("A" * 65)
    with pytest.raises(ContactError, match="time zone name"):
        normalize_time_zone(3)
