"""Contact events, published to whoever listens (the workflow engine).

Contacts know nothing of workflows: `workflows` subscribes when it loads.
Subscribers run inside the publisher's transaction, so a run started by an
event exists if and only if the change that caused it commits.

Events that are not a change of the contact's own row (an email opened or
clicked, an SMS reply, a custom event) are also stored (`Event`), each with
its id and time: `record_contact_event` stores and publishes in one go, and
an occurrence that counts once (`dedup_key`: an email's open per run and
step, one link's click) is neither stored nor published a second time.
"""

import hashlib
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from kernel import clock

CONTACT_CREATED = "contact.created"
CONTACT_UPDATED = "contact.updated"
CONTACT_DELETED = "contact.deleted"  # published before the row goes, in the same transaction
TAG_ADDED = "tag.added"
TAG_REMOVED = "tag.removed"
EMAIL_OPENED = "email.opened"
EMAIL_CLICKED = "email.clicked"
SMS_REPLIED = "sms.replied"
# Relay records these itself (tracking, inbound SMS): an API client cannot post them.
ENGAGEMENT_EVENTS = (EMAIL_OPENED, EMAIL_CLICKED, SMS_REPLIED)


@dataclass(frozen=True)
class ContactEvent:
    account_id: int
    contact_id: int
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)  # the stored Event's id, when it is stored
    # The database's now for the unit of work that raised it (kernel.clock): compared with times the engine
    # stored (a wait's timeout, a goal's run), so never this host's clock.
    occurred_at: datetime = field(default_factory=clock.now)


Subscriber = Callable[[ContactEvent], None]
_subscribers: list[Subscriber] = []


def subscribe(subscriber: Subscriber) -> None:
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)


def publish(event: ContactEvent) -> None:
    for subscriber in list(_subscribers):
        subscriber(event)


_many_scopes: list[Callable[[], AbstractContextManager[None]]] = []


def on_many_events(scope: Callable[[], AbstractContextManager[None]]) -> None:
    """A subscriber's context for many events published in one transaction (`publishing_many`): what it
    would read for each event it may read once for all of them (the workflow engine: whether the account
    has runs waiting for events or goals)."""
    if scope not in _many_scopes:
        _many_scopes.append(scope)


@contextmanager
def publishing_many() -> Iterator[None]:
    """Around a transaction that publishes many events (an import of 200,000 contacts publishes 600,000):
    each subscriber's `on_many_events` scope is open for all of them."""
    with ExitStack() as stack:
        for scope in list(_many_scopes):
            stack.enter_context(scope())
        yield


def dedup_key(*parts: object) -> str:
    """The key of an occurrence that counts once, e.g. (run, step, link) of a click; bounded whatever its parts."""
    return hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()


def store_event(
    *, account_id: int, contact_id: int, name: str, data: dict[str, Any] | None = None, dedup: str = ""
) -> ContactEvent | None:
    """Store the event on the contact, in the caller's transaction; None when `dedup` says it happened before."""
    from contacts.infrastructure.models import Event  # the models load after this module's importers

    event = ContactEvent(account_id=account_id, contact_id=contact_id, name=name, data=dict(data or {}))
    row = Event(
        id=uuid.UUID(event.id),
        account_id=account_id,
        contact_id=contact_id,
        name=name,
        data=event.data,
        dedup_key=dedup,
        occurred_at=event.occurred_at,
    )
    if not dedup:
        row.save(force_insert=True)
        return event
    try:
        with transaction.atomic():  # a savepoint: the duplicate's refusal leaves the caller's transaction usable
            row.save(force_insert=True)
    except IntegrityError:
        return None
    return event


def record_contact_event(
    *, account_id: int, contact_id: int, name: str, data: dict[str, Any] | None = None, dedup: str = ""
) -> ContactEvent | None:
    """Store the event and publish it (workflows start, waits wake, goals are met) in the caller's transaction."""
    with transaction.atomic():
        event = store_event(account_id=account_id, contact_id=contact_id, name=name, data=data, dedup=dedup)
        if event is not None:
            publish(event)
    return event
