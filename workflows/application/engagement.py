"""Email engagement seen from the engine: whether a run's email is tracked, and what it is tracked as.

Opens and clicks are recorded by integrations (`/t/o/`, `/t/c/`) as contact
events; here the engine decides, when a step sends an email, whether its
links and pixel go through Relay (the workflow's switch, else the account's
default) and names the step the events will carry (its key).
"""

from __future__ import annotations

from typing import Any

from contacts.application.events import EMAIL_CLICKED, EMAIL_OPENED
from contacts.application.selectors import contact_events
from workflows.domain.workflow import Step
from workflows.infrastructure.models import Workflow


def step_key(step: Step) -> str:
    """The step's stable key (`step_<n>`, 1-based, for a step written without one)."""
    key = getattr(step, "key", None)
    return str(key) if key else f"step_{step.index + 1}"


def email_tracking_enabled(workflow_id: int) -> bool:
    """Read when the email is sent, so switching tracking off takes effect at once (not at the next publish)."""
    found = (
        Workflow.objects.filter(pk=workflow_id)
        .values_list("track_email_engagement", "account__track_email_engagement")
        .first()
    )
    if found is None:
        return False
    own, account_default = found
    return bool(account_default if own is None else own)


def workflow_sending_rules(workflow_id: int) -> dict[str, Any]:
    """The workflow's overrides of the account's send windows and caps (Workflow.sending_rules), read when a
    message is sent, like tracking: a marketer who tightens quiet hours expects the next message to obey."""
    found = Workflow.objects.filter(pk=workflow_id).values_list("sending_rules", flat=True).first()
    return dict(found) if isinstance(found, dict) else {}


def email_engagement(*, run_id: str, contact_id: int) -> dict[str, dict[str, Any]]:
    """What the run's emails came to, by step key: `{"welcome": {"opened": True, "clicked": True, "links": [...]}}`.

    The values behind the condition paths `steps.<key>.opened` / `steps.<key>.clicked`; read from the contact's
    engagement events (through their index on contact and name), so an email nobody opened has no entry.
    """
    found: dict[str, dict[str, Any]] = {}
    rows = contact_events(contact_id=contact_id, names=(EMAIL_OPENED, EMAIL_CLICKED), run_id=str(run_id))
    for name, data in rows:
        step = found.setdefault(str(data.get("step", "")), {"opened": False, "clicked": False, "links": []})
        step["opened"] = True  # a click is an open too
        if name == EMAIL_CLICKED:
            step["clicked"] = True
            step["links"].append(data.get("link", ""))
    return found
