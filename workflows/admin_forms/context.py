"""What the builder's forms offer a marketer of one account: its tags, custom fields, time zone, events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from contacts.application.selectors import account_custom_fields, account_tags
from contacts.application.services import EDITABLE_FIELDS
from workflows.domain.templates import CONTACT_VARIABLES

CONTACT_FIELD_LABELS = {
    "email": "Email",
    "phone": "Phone",
    "first_name": "First name",
    "last_name": "Last name",
    "full_name": "Full name",
    "tags": "Tags",
    "custom_fields": "Custom fields",
    "id": "Contact id",
}


@dataclass(frozen=True)
class StepRef:
    """A step as the builder's choices name it: its key, a label, and its action."""

    key: str
    label: str
    action_type: str


@dataclass(frozen=True)
class BuilderContext:
    account_id: int | None = None
    tags: tuple[str, ...] = ()
    custom_fields: tuple[str, ...] = ()
    time_zone: str = "UTC"
    known_events: tuple[str, ...] = ()
    default_attempts: int = 3
    default_base_delay: float = 60.0
    steps: tuple[StepRef, ...] = ()  # the draft's steps as saved (the browser keeps the choices current)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def contact_field_choices(self) -> list[tuple[str, str]]:
        """Contact fields a step may set."""
        return [(name, CONTACT_FIELD_LABELS.get(name, name)) for name in EDITABLE_FIELDS]

    def variables(self) -> list[dict[str, str]]:
        """The personalisation picker's entries: what a template can name, grouped for a marketer."""
        entries = [
            {"group": "Contact", "label": CONTACT_FIELD_LABELS.get(name, name), "value": f"contact.{name}"}
            for name in CONTACT_VARIABLES
            if name not in ("custom_fields", "tags", "id")
        ]
        entries += [
            {"group": "Custom fields", "label": name, "value": f"contact.custom_fields.{name}"}
            for name in self.custom_fields
        ]
        entries += [
            {"group": "Workflow", "label": "Workflow name", "value": "workflow.name"},
            {"group": "Trigger data", "label": "A value sent with the trigger…", "value": "trigger."},
        ]
        return entries


def builder_context(account: Any | None) -> BuilderContext:
    """The context for one account (None: before an account is chosen, nothing account-specific)."""
    from workflows.application.workflows import known_events

    defaults: dict[str, Any] = {
        "default_attempts": int(settings.WORKFLOW_STEP_MAX_ATTEMPTS),
        "default_base_delay": float(settings.WORKFLOW_STEP_BASE_DELAY),
    }
    if account is None:
        return BuilderContext(known_events=tuple(sorted(known_events(account_id=0))), **defaults)
    return BuilderContext(
        account_id=account.pk,
        tags=tuple(account_tags(account_id=account.pk)),
        custom_fields=tuple(account_custom_fields(account_id=account.pk)),
        time_zone=account.time_zone or "UTC",
        known_events=tuple(sorted(known_events(account_id=account.pk))),
        **defaults,
    )
