"""Contacts' events start workflows. Subscribed once, in WorkflowsConfig.ready()."""

from contacts.application.events import ContactEvent
from workflows.application.executions import ExecutionService


def on_contact_event(event: ContactEvent) -> None:
    """Runs inside the contact change's transaction: the runs it starts exist iff that change commits."""
    ExecutionService().record_event(
        account=event.account_id, contact=event.contact_id, name=event.name, data=event.data
    )
