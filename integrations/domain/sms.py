"""SMS consent keywords and phone numbers. Plain Python.

Carriers and the CTIA require that a reply of STOP (and its synonyms) ends
all messages to that number, and START brings them back. The keywords are
the ones Twilio's Advanced Opt-Out honours by default, so what Relay records
matches what the provider enforces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from contacts.domain.model import ContactError
from contacts.domain.model import normalize_phone as contact_phone_spelling

OPT_OUT_KEYWORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPT OUT"})
OPT_IN_KEYWORDS = frozenset({"START", "UNSTOP"})

MAX_SMS_LENGTH = 1600  # Twilio's limit for one message body (it splits into segments itself)
_E164 = re.compile(r"^\+[1-9]\d{6,14}$")


class SmsConsentCommand(StrEnum):
    OPT_OUT = "opt_out"
    OPT_IN = "opt_in"


def consent_keyword(body: str | None) -> tuple[SmsConsentCommand, str] | None:
    """The consent command a reply carries, with the keyword as matched; None for any other text.

    The whole body must be the keyword: any case, surrounding spaces ignored
    (and runs of inner spaces, so "opt   out" is OPT OUT). "Stop sending me
    deals" is a message, not a keyword, exactly as the carriers read it.
    """
    if not body:
        return None
    keyword = " ".join(body.split()).upper()
    if keyword in OPT_OUT_KEYWORDS:
        return SmsConsentCommand.OPT_OUT, keyword
    if keyword in OPT_IN_KEYWORDS:
        return SmsConsentCommand.OPT_IN, keyword
    return None


def normalize_phone(phone: str | None) -> str:
    """The contacts' one spelling of a phone number (`contacts.domain.normalize_phone`), so what is sent to
    and what arrives from the provider compares equal to what is stored; for a text that is no phone number
    (a value stored before phones were checked), just its digits, leading + kept."""
    if not phone:
        return ""
    try:
        return contact_phone_spelling(phone)
    except ContactError:
        phone = phone.strip()
        digits = re.sub(r"\D", "", phone)
        return f"+{digits}" if phone.startswith("+") else digits


def is_e164(phone: str) -> bool:
    return bool(_E164.match(phone))


def mask_phone(phone: str | None) -> str:
    """For logs: enough to tell numbers apart, not enough to dial one."""
    phone = normalize_phone(phone)
    if len(phone) <= 4:
        return "***"
    return f"{phone[:3]}***{phone[-2:]}"


def mask_email(address: str | None) -> str:
    """For logs and the unsubscribe page: a***@example.com."""
    if not address or "@" not in address:
        return "***"
    local, _, domain = address.rpartition("@")
    return f"{local[:1]}***@{domain}"


@dataclass(frozen=True)
class ReplyCandidate:
    """A contact whose phone is the number a reply came from."""

    contact_id: int
    account_id: int
    updated_at: datetime
    texted_at: datetime | None = None  # when Relay last sent it an SMS from the number the reply was sent to


def reply_recipient(candidates: Iterable[ReplyCandidate]) -> ReplyCandidate | None:
    """The one contact an inbound reply belongs to, or None when no account can be told.

    A reply answers the last message its sender received from the number it writes to, so it belongs to the
    contact Relay last texted from that number (and to its account alone: Relay sends every account's SMS
    from one number, so the number does not say whose conversation it is; the last message does). When
    Relay never texted any of them from it (the person wrote first), the most recently updated contact with
    that phone - if they are all in one account. With the phone in several accounts and no conversation,
    giving the text to any of them could hand one tenant's customer's words to another: it goes to no one.
    """
    found = list(candidates)
    texted = [(c.texted_at, c.contact_id, c) for c in found if c.texted_at is not None]
    if texted:
        return max(texted, key=lambda t: (t[0], t[1]))[2]
    if not found or len({c.account_id for c in found}) > 1:
        return None
    return max(found, key=lambda c: (c.updated_at, c.contact_id))
