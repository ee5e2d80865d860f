"""Opens and clicks of Relay's email: signed tracking links, and the use cases behind `/t/o/...` and `/t/c/...`.

A token is `django.core.signing` over what it records (account, contact,
run, step and, for a click, the link), each kind with its own salt, and it
expires after RELAY_TRACKING_MAX_AGE_DAYS. The click redirect goes only to
the URL inside its signed token, so it goes only to a link that was in that
email: nobody can make Relay's address redirect elsewhere (no open redirect).
A tampered or expired token records nothing and is answered 404. The token
is signed, not encrypted: it shows the ids it carries to whoever holds the
email, which are the recipient's own.

Each open and each link's click counts once per run and step (`dedup_key`):
a second one is neither stored nor published. A click is also an open (a
mail client that blocks images still shows that the email was read).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse

from contacts.application.events import EMAIL_CLICKED, EMAIL_OPENED, dedup_key, record_contact_event
from contacts.application.selectors import contact_exists
from integrations.application.unsubscribe import public_url
from integrations.domain.channels import EmailMessage
from integrations.domain.tracking import EmailTracking

log = logging.getLogger("relay.integrations.tracking")

OPEN_SALT = "relay.integrations.tracking.open"
CLICK_SALT = "relay.integrations.tracking.click"
MAX_LINK_LENGTH = 2048


@dataclass(frozen=True)
class Tracked:
    """What a valid token says."""

    account_id: int
    contact_id: int
    run_id: str
    step_key: str
    link: str = ""  # clicks only


def _payload(message: EmailMessage, tracking: EmailTracking) -> dict[str, Any]:
    return {"a": message.account_id, "k": message.contact_id, "r": tracking.run_id, "s": tracking.step_key}


class SignedTrackingLinks:
    """The tracked addresses of one email's links and pixel (what the email channel is given)."""

    def __init__(self) -> None:
        self._own = public_url("/")

    def click_url(self, message: EmailMessage, tracking: EmailTracking, link: str) -> str | None:
        """The tracked address of `link`; None leaves it as written (Relay's own pages, an over-long URL)."""
        if link.startswith(self._own) or len(link) > MAX_LINK_LENGTH:
            return None  # the unsubscribe link, an already tracked link: never through the redirect
        token = signing.dumps({**_payload(message, tracking), "u": link}, salt=CLICK_SALT, compress=True)
        return public_url(reverse("integrations:track-click", kwargs={"token": token}))

    def open_url(self, message: EmailMessage, tracking: EmailTracking) -> str:
        token = signing.dumps(_payload(message, tracking), salt=OPEN_SALT, compress=True)
        return public_url(reverse("integrations:track-open", kwargs={"token": token}))


def read_token(token: str, *, click: bool) -> Tracked | None:
    """What the token says, or None if it was not issued by this Relay, was altered or has expired."""
    max_age = timedelta(days=int(getattr(settings, "RELAY_TRACKING_MAX_AGE_DAYS", 365)))
    try:
        payload = signing.loads(token, salt=CLICK_SALT if click else OPEN_SALT, max_age=max_age)
    except (signing.BadSignature, ValueError):  # SignatureExpired is a BadSignature
        return None
    if not isinstance(payload, dict):
        return None
    account_id, contact_id, run, step = payload.get("a"), payload.get("k"), payload.get("r"), payload.get("s")
    link = payload.get("u", "")
    if not (isinstance(account_id, int) and isinstance(contact_id, int)):
        return None
    if not (isinstance(run, str) and isinstance(step, str) and isinstance(link, str)):
        return None
    if click and not link.lower().startswith(("http://", "https://")):
        return None
    return Tracked(account_id, contact_id, run, step, link)


@transaction.atomic
def record_open(tracked: Tracked) -> bool:
    """The email's pixel loaded: `email.opened` on the contact, once per run and step. True if it was new."""
    if not contact_exists(contact_id=tracked.contact_id, account_id=tracked.account_id):
        return False  # the contact was deleted since: nobody to record it on
    return _opened(tracked)


@transaction.atomic
def record_click(tracked: Tracked) -> bool:
    """A link was followed: `email.clicked` once per run, step and link (and the open, if not yet)."""
    if not contact_exists(contact_id=tracked.contact_id, account_id=tracked.account_id):
        return False
    _opened(tracked)
    event = record_contact_event(
        account_id=tracked.account_id,
        contact_id=tracked.contact_id,
        name=EMAIL_CLICKED,
        data={"run": tracked.run_id, "step": tracked.step_key, "link": tracked.link},
        dedup=dedup_key(tracked.run_id, tracked.step_key, tracked.link),
    )
    return event is not None


def _opened(tracked: Tracked) -> bool:
    event = record_contact_event(
        account_id=tracked.account_id,
        contact_id=tracked.contact_id,
        name=EMAIL_OPENED,
        data={"run": tracked.run_id, "step": tracked.step_key},
        dedup=dedup_key(tracked.run_id, tracked.step_key, ""),
    )
    return event is not None
