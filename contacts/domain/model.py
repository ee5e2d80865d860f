"""Contacts' rules: tag spelling, phone spelling and consent. Plain Python."""

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_TAG_LENGTH = 64
MAX_TAGS = 100  # per contact, on every path that adds one (create, the tag endpoint, the admin, a workflow step)
# Control characters and unpaired surrogates: invisible in lists, and NUL cannot be stored in PostgreSQL.
_UNPRINTABLE = frozenset({"Cc", "Cs"})
# Format characters (zero-width space and joiners, BOM, soft hyphen, direction marks) are dropped: invisible,
# they would make "vip" and "vip\u200b" two tags that look alike, and direction marks can disguise a tag.
_INVISIBLE = "Cf"


class ContactError(ValueError):
    """Bad contact input; `field` names what was wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


_PHONE_PUNCTUATION = re.compile(r"[\s().\-/]")
MAX_PHONE_DIGITS = 15  # E.164


def normalize_phone(phone: str) -> str:
    """The one spelling a phone number is stored in: digits, with the leading + kept.

    '+1 (555) 010-0000' is stored as '+15550100000', the spelling providers use, so an inbound
    STOP from that number finds the contact. A leading single quote, the spreadsheets' text mark that the
    CSV export writes before '+15550100000', is dropped, so an export imports back. Raises
    ContactError("phone", ...) for anything that is not a phone number once spaces, dots, dashes, slashes
    and brackets are taken out.
    """
    phone = phone.strip()
    if phone.startswith("'"):  # a spreadsheet's "this is text" mark, as the contact export writes it
        phone = phone[1:].lstrip()
    if not phone:
        return ""
    plus = phone.startswith("+")
    if plus and not phone.startswith("+39"):
        # '+44 (0)20 7946 0000': the (0) is the national trunk prefix, not dialled after a country code
        # (Italy is the exception: its numbers keep the 0, '+39 06 ...').
        phone = phone.replace("(0)", "")
    digits = _PHONE_PUNCTUATION.sub("", phone[1:] if plus else phone)
    if not digits.isascii() or not digits.isdigit():
        raise ContactError("phone", "must be a phone number: digits, optionally a leading + and spaces or dashes")
    if len(digits) > MAX_PHONE_DIGITS:
        raise ContactError("phone", f"must have at most {MAX_PHONE_DIGITS} digits")
    return f"+{digits}" if plus else digits


def normalize_tag(tag: object) -> str:
    """Tags compare case-insensitively and without surrounding spaces."""
    if not isinstance(tag, str):
        raise ContactError("tag", "must be a string")
    cleaned = "".join(ch for ch in tag if unicodedata.category(ch) != _INVISIBLE).strip().lower()
    if not cleaned:
        raise ContactError("tag", "must not be blank")
    if len(cleaned) > MAX_TAG_LENGTH:
        raise ContactError("tag", f"must be at most {MAX_TAG_LENGTH} characters")
    if any(unicodedata.category(ch) in _UNPRINTABLE for ch in cleaned):
        raise ContactError("tag", "must not contain control characters")
    return cleaned


def with_tag(tags: list[str], tag: str) -> tuple[list[str], bool]:
    """The tag list with `tag` added, and whether it was new; refused when the contact has MAX_TAGS already."""
    tag = normalize_tag(tag)
    if tag in tags:
        return list(tags), False
    if tags_full(tags, tag):
        raise too_many_tags()
    return [*tags, tag], True


def normalize_tags(tags: object) -> list[str]:
    """A whole tag list as it is stored: each tag normalized, each once, in order, at most MAX_TAGS."""
    if not isinstance(tags, list):
        raise ContactError("tags", "must be a list of tags")
    normalized: list[str] = []
    for tag in tags:
        normalized, _ = with_tag(normalized, tag)
    return normalized


def tags_full(tags: list[str], tag: str) -> bool:
    """Whether adding `tag` (normalized) would take the contact past MAX_TAGS; a tag it has never does."""
    return tag not in tags and len(tags) >= MAX_TAGS


def too_many_tags(field: str = "tags") -> ContactError:
    return ContactError(field, f"a contact has at most {MAX_TAGS} tags; remove one first")


def check_reachable(email: str, phone: str) -> None:
    """A contact is someone Relay can reach: it needs an email address or a phone number (or both)."""
    if not email and not phone:
        raise ContactError("email", "a contact needs an email address or a phone number")


# A custom field with no value: absent, null, or empty text all read "not set" to a marketer (and to `is_set`).
_NO_VALUE: tuple[object, ...] = (None, "")


def changed_custom_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The names of the custom fields whose value differs between two versions of a contact's custom fields.

    What `contact.updated` says changed, so a workflow watching one custom field hears of that field only:
    absent -> set, set -> another value and set -> removed are changes; absent -> null or empty text is none
    (both say "no value"), nor is a change of any other field. True and 1 are different values.
    """
    changed = []
    for name in sorted({*before, *after}):
        old, new = before.get(name), after.get(name)
        if old in _NO_VALUE and new in _NO_VALUE:
            continue
        if old != new or isinstance(old, bool) != isinstance(new, bool):
            changed.append(name)
    return changed


def without_tag(tags: list[str], tag: str) -> tuple[list[str], bool]:
    """The tag list with `tag` removed, and whether it was there."""
    tag = normalize_tag(tag)
    if tag not in tags:
        return list(tags), False
    return [t for t in tags if t != tag], True


class ConsentChannel(StrEnum):
    EMAIL = "email"
    SMS = "sms"  # SMS and voice calls share the phone number's opt-out


class ConsentSource(StrEnum):
    API = "api"
    ADMIN = "admin"
    UNSUBSCRIBE_LINK = "unsubscribe_link"
    INBOUND_SMS = "inbound_sms"
    WORKFLOW = "workflow"


@dataclass(frozen=True)
class ConsentState:
    """What a contact has agreed to receive. Consent is law: checked when a step runs."""

    unsubscribed: bool
    sms_opted_out: bool

    def allows_email(self) -> bool:
        return not self.unsubscribed

    def allows_sms(self) -> bool:
        return not self.sms_opted_out

    def allows_voice(self) -> bool:
        return not self.sms_opted_out
