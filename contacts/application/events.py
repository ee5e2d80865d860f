"""Contact events, published to whoever listens (the workflow engine).

Contacts know nothing of workflows: `workflows` subscribes when it loads.
Subscribers run inside the publisher's transaction, so a run started by an
event exists if and only if the change that caused it commits.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CONTACT_CREATED = "contact.created"
CONTACT_UPDATED = "contact.updated"
CONTACT_DELETED = "contact.deleted"  # published before the row goes, in the same transaction
TAG_ADDED = "tag.added"
TAG_REMOVED = "tag.removed"


@dataclass(frozen=True)
class ContactEvent:
    account_id: int
    contact_id: int
    name: str
    data: dict[str, Any] = field(default_factory=dict)


Subscriber = Callable[[ContactEvent], None]
_subscribers: list[Subscriber] = []


def subscribe(subscriber: Subscriber) -> None:
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)


def publish(event: ContactEvent) -> None:
    for subscriber in list(_subscribers):
        subscriber(event)
