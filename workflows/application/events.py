"""Contacts' events reach the engine (they start workflows, wake waits, meet goals); a deleted workflow is
forgotten by the trigger caches.

Subscribed once, in WorkflowsConfig.ready().
"""

from typing import Any

from contacts.application.events import CONTACT_DELETED, ContactEvent
from workflows.application.runs.operating import cancel_jobs_of_contact
from workflows.application.runs.receiving import receive_event
from workflows.application.trigger_cache import triggers_changed
from workflows.infrastructure.models import Workflow


def on_contact_event(event: ContactEvent) -> None:
    """Runs inside the contact change's transaction: the runs it starts exist iff that change commits."""
    if event.name == CONTACT_DELETED:
        # Its runs are deleted with it (personal data); nothing may start for it, and its queued jobs go.
        cancel_jobs_of_contact(contact_id=event.contact_id)
        return
    receive_event(event)


def on_workflow_deleted(sender: type[Workflow], instance: Workflow, **kwargs: Any) -> None:
    """post_delete: in the deleting transaction, so workers drop the account's cached triggers at its commit."""
    triggers_changed(instance.account_id)
