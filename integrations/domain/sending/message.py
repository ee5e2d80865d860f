"""A message as the sending rules see it: which channel, for what purpose, to whom, on whose clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from contacts.domain.model import ConsentState


class Channel(StrEnum):
    EMAIL = "email"
    SMS = "sms"
    VOICE = "voice"


class Purpose(StrEnum):
    """Why a message is sent. Marketing obeys every rule; transactional (a receipt, a password reset) is
    counted but never capped, and reaches a contact who unsubscribed from marketing email; a test (the
    builder's "send a test") bypasses every rule."""

    MARKETING = "marketing"
    TRANSACTIONAL = "transactional"
    TEST = "test"


@dataclass(frozen=True)
class Outbound:
    """One message about to leave.

    key: the message's stable identity (the ledger's idempotency key): the same on every attempt, so a
      deferral's spread puts it at the same place in an opening however often it is asked.
    address: the email address or phone number it goes to ("" when the contact has none).
    consent: the contact's consent as it is now; None when the recipient is no contact (a bare address).
    time_zone: the recipient's clock (contacts.domain.clock.resolve_time_zone), an IANA name.
    """

    channel: Channel
    purpose: Purpose
    key: str
    address: str
    consent: ConsentState | None = None
    time_zone: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            return ZoneInfo("UTC")


@dataclass(frozen=True)
class SentMessage:
    """A message the contact was already sent (a ledger row), as the frequency cap counts it."""

    at: datetime
    channel: Channel
    purpose: Purpose
