"""Contacts' events start workflows. Subscribed once, in WorkflowsConfig.ready()."""

from contacts.application.events import CONTACT_DELETED, ContactEvent
from workflows.application.executions import ExecutionService


def on_contact_event(event: ContactEvent) -> None:
    """Runs inside the contact change's transaction: the runs it starts exist iff that change commits."""
    if event.name == CONTACT_DELETED:
        # Its runs are deleted with it (personal data); nothing may start for it, and its queued jobs go.
        ExecutionService().contact_deleted(contact_id=event.contact_id)
        return
    ExecutionService().record_event(
        account=event.account_id, contact=event.contact_id, name=event.name, data=event.data
    )
