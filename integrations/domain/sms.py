"""SMS consent keywords and phone numbers. Plain Python.

Carriers and the CTIA require that a reply of STOP (and its synonyms) ends
all messages to that number, and START brings them back. The keywords are
the ones Twilio's Advanced Opt-Out honours by default, so what Relay records
matches what the provider enforces.
"""

from __future__ import annotations

import re
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
