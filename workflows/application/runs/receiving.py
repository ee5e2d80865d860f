"""An event reaches the engine: `receive_event` (every event, from contacts' publish) and `post_event` (the API).

One way in for every event, whatever made it (a tag added by a step, a
contact update, an email opened or clicked, an SMS reply, a custom event an
API client posted): it starts the workflows it triggers (`record_event`),
and the runs that wait for it or have it as a goal learn of it. Everything
joins the caller's transaction: what the event causes exists if and only if
the event commits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from contacts.application.events import ContactEvent, store_event
from workflows.application.errors import ContactNotFound
from workflows.application.runs.goals import account_listens, meet_goals
from workflows.application.runs.starting import EventOutcome, check_trigger_data, record_event
from workflows.application.runs.waiting import wake_waiting_runs
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.triggers import EVENT_NAME
from workflows.infrastructure.store import RunStore


def receive_event(event: ContactEvent) -> EventOutcome:
    """What an event causes in the engine, in the event's transaction: the runs it starts (returned), the
    waiting runs it wakes."""
    outcome = record_event(account=event.account_id, contact=event.contact_id, name=event.name, data=event.data)
    if account_listens(event.account_id):  # else no run of the account can wait for it or have a goal
        wake_waiting_runs(event)
        meet_goals(event)
    return outcome


def post_event(*, account_id: int, contact_id: int, name: str, data: Mapping[str, Any] | None = None) -> EventOutcome:
    """A custom event an API client sends: stored on the contact (with its id and time), then received.

    Checked before anything is stored: a bad name or data stores nothing.
    """
    if not isinstance(name, str) or not EVENT_NAME.fullmatch(name):
        raise WorkflowValidationError.single(
            "name", "an event name is letters, digits and . _ : - (at most 100), e.g. order.paid"
        )
    payload = check_trigger_data(data, path="data")
    with transaction.atomic():
        if RunStore().contact(contact_id, account_id) is None:
            raise ContactNotFound(contact_id)
        event = store_event(account_id=account_id, contact_id=contact_id, name=name, data=payload)
        assert event is not None  # no dedup key: always stored
        return receive_event(event)
