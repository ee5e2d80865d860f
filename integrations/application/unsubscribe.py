"""Email unsubscribe: the per-contact signed link, and the use case behind it.

The token is the contact's id signed with SECRET_KEY (django.core.signing,
its own salt); it never expires, because an unsubscribe link must keep working
in an old email (CAN-SPAM asks for 30 days at least; mailbox providers expect
forever). It grants one thing only: unsubscribing that contact from email.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse

from contacts.application.selectors import contact_email, contact_exists
from contacts.application.services import contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource

SALT = "relay.integrations.unsubscribe"


class InvalidUnsubscribeToken(ValueError):
    """The token was not issued by this Relay (or was altered)."""


def unsubscribe_token(contact_id: int) -> str:
    return signing.dumps({"c": int(contact_id)}, salt=SALT)


def contact_id_from_token(token: str) -> int:
    try:
        payload = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise InvalidUnsubscribeToken("token: not a valid unsubscribe token") from None
    contact_id = payload.get("c") if isinstance(payload, dict) else None
    if not isinstance(contact_id, int):
        raise InvalidUnsubscribeToken("token: not a valid unsubscribe token")
    return contact_id


def public_url(path: str) -> str:
    """An absolute URL on Relay's public address (RELAY_PUBLIC_URL), for links in email and for providers."""
    base = str(getattr(settings, "RELAY_PUBLIC_URL", "http://127.0.0.1:8000")).rstrip("/")
    return f"{base}{path}"


def unsubscribe_url(contact_id: int) -> str:
    """The link in the contact's email and its List-Unsubscribe header."""
    return public_url(reverse("integrations:unsubscribe", kwargs={"token": unsubscribe_token(contact_id)}))


@dataclass(frozen=True)
class UnsubscribeOutcome:
    contact_id: int
    found: bool  # False: the contact was deleted since (nothing left to email)
    changed: bool  # False: already unsubscribed (the second click changes nothing)
    email: str = ""


def unsubscribe_preview(*, token: str) -> UnsubscribeOutcome:
    """What the confirmation page shows; changes nothing (link scanners fetch GETs)."""
    contact_id = contact_id_from_token(token)
    email = contact_email(contact_id=contact_id)
    if email is None:
        return UnsubscribeOutcome(contact_id=contact_id, found=False, changed=False)
    return UnsubscribeOutcome(contact_id=contact_id, found=True, changed=False, email=email)


@transaction.atomic
def unsubscribe_by_token(*, token: str, one_click: bool) -> UnsubscribeOutcome:
    """Mark the contact unsubscribed from email; safe to repeat (only the first change is recorded)."""
    contact_id = contact_id_from_token(token)
    if not contact_exists(contact_id=contact_id):
        return UnsubscribeOutcome(contact_id=contact_id, found=False, changed=False)
    contact, changed = contact_set_consent(
        contact_id=contact_id,
        channel=ConsentChannel.EMAIL,
        opted_out=True,
        source=ConsentSource.UNSUBSCRIBE_LINK,
        detail="one-click (RFC 8058)" if one_click else "unsubscribe page",
    )
    return UnsubscribeOutcome(contact_id=contact_id, found=True, changed=changed, email=contact.email)
