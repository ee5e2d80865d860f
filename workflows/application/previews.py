"""See a step as a contact would, and send it once to a test address: no run starts.

The step's config is checked by the same rules as a save (`parse_steps`), its templates are rendered with
the chosen contact's data as a run would render them, and a test goes out through the door
(`send_test_message`: purpose `test`, so no sending rule applies, and one row of the ledger), to the address
or number the marketer typed, not to the contact.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import nh3

from contacts.application.selectors import contact_row
from contacts.domain.model import normalize_phone
from integrations.application.outbound import Content, Origin, Sent, send_message
from integrations.domain.channels import DeliveryResult
from integrations.domain.sending import Purpose
from workflows.application.definitions import validation_context
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.templates import TemplateError, template_context
from workflows.domain.workflow import Step, parse_steps
from workflows.steps import registry

# What the preview keeps of an email's HTML: its layout and styling, never scripts, forms or event handlers.
# It is also shown in a sandboxed frame (no scripts, no same-origin access): two fences, not one.
_HTML_ATTRIBUTES = {
    "*": {"style", "class", "align", "width", "height", "bgcolor", "border", "cellpadding", "cellspacing", "dir"},
    "a": {"href", "title", "target"},
    "img": {"src", "alt", "title", "width", "height"},
    "td": {"colspan", "rowspan", "valign"},
    "th": {"colspan", "rowspan", "valign"},
}


@dataclass(frozen=True)
class StepPreview:
    action_type: str
    contact_label: str
    shape: str = ""  # how the builder shows it: "email", "sms" or "call" (its type's previewer says)
    subject: str = ""
    text: str = ""
    html: str = ""  # sanitised (nh3): shown only in a sandboxed frame
    sms: str = ""
    voice_message: str = ""
    recording_url: str = ""
    problems: list[str] = field(default_factory=list)  # why it cannot be shown (config or rendering)

    @property
    def sms_length(self) -> int:
        return len(self.sms)

    def as_dict(self) -> dict[str, Any]:
        """What the builder shows, as data: every text a plain string the page puts in as text, never as
        markup (a contact's name may be `<img src=x onerror=...>`); `html` sanitised, for a sandboxed frame."""
        return {**dataclasses.asdict(self), "sms_length": self.sms_length}


class PreviewRefused(ValueError):
    """The step cannot be previewed or sent: its config has problems, or the address is not one."""


class StepPreviewer(Protocol):
    """A step type that can be previewed and sent as a test: its executor module's `PREVIEW`."""

    def render(self, step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
        """The step as the contact would see it (templates rendered with `context`)."""
        ...

    def send_test(
        self, preview: StepPreview, to: str, account_id: int, workflow_id: int | None = None
    ) -> DeliveryResult:
        """Send `preview` once to `to` through the door as a test (PreviewRefused when `to` is no address)."""
        ...


def previewer_for(action_type: str) -> StepPreviewer | None:
    """The step type's previewer, or None when it has nothing to preview (or is no step type)."""
    if action_type not in registry.STEP_TYPES:
        return None
    return cast(StepPreviewer | None, getattr(registry.load(action_type, "executor"), "PREVIEW", None))


def _checked_step(action_type: str, config: Mapping[str, Any]) -> Step:
    try:
        (step,) = parse_steps([{"action_type": action_type, "config": dict(config)}], validation_context())
    except WorkflowValidationError as exc:
        raise PreviewRefused("; ".join(str(e).removeprefix("steps[0].config.") for e in exc.errors)) from None
    return step


def _contact_row(contact: Mapping[str, Any] | None) -> dict[str, Any]:
    if contact is None:
        return {
            "id": None,
            "email": "",
            "phone": "",
            "first_name": "",
            "last_name": "",
            "tags": [],
            "custom_fields": {},
        }
    return {
        **contact,
        "tags": list(contact["tags"] or []),
        "custom_fields": dict(contact["custom_fields"] or {}),
    }


def _context(
    contact: Mapping[str, Any] | None, workflow: Mapping[str, Any], trigger_data: Mapping[str, Any]
) -> Mapping[str, Any]:
    return template_context(
        contact=_contact_row(contact),
        trigger=trigger_data,
        steps=[],
        event="",
        workflow=dict(workflow),
        run={"id": "preview", "step": 0},
    )


def sanitised_html(html: str) -> str:
    return nh3.clean(html, attributes=_HTML_ATTRIBUTES, link_rel="noopener noreferrer")


def step_preview(
    *,
    account_id: int,
    action_type: str,
    config: Mapping[str, Any],
    contact_id: int | None,
    workflow: Mapping[str, Any] | None = None,
    trigger_data: Mapping[str, Any] | None = None,
) -> StepPreview:
    """The step rendered for one of the account's contacts (another account's contact is not found)."""
    contact = contact_row(account_id=account_id, contact_id=contact_id) if contact_id else None
    label = (
        (contact["email"] or contact["phone"] or f"contact {contact['id']}") if contact else "no contact (empty values)"
    )
    if previewer_for(action_type) is None:
        return StepPreview(action_type, label, problems=["This kind of step has nothing to preview."])
    try:
        step = _checked_step(action_type, config)
    except PreviewRefused as exc:
        return StepPreview(action_type, label, problems=[f"Fix the step first: {exc}"])
    context = _context(contact, workflow or {"id": None, "name": ""}, trigger_data or {})
    try:
        return _rendered(step, label, context)
    except TemplateError as exc:
        return StepPreview(action_type, label, problems=[str(exc)])


def _rendered(step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
    previewer = previewer_for(step.action_type)
    assert previewer is not None  # step_preview checked it
    return previewer.render(step, label, context)


def step_send_test(
    *,
    account_id: int,
    action_type: str,
    config: Mapping[str, Any],
    to: str,
    contact_id: int | None = None,
    workflow: Mapping[str, Any] | None = None,
) -> DeliveryResult:
    """Send the step once to `to` through the real channel, filled in with the contact's data. No run starts.

    Raises PreviewRefused (the step or the address), or the channel's classified error (kernel.failures).
    """
    preview = step_preview(
        account_id=account_id, action_type=action_type, config=config, contact_id=contact_id, workflow=workflow
    )
    if preview.problems:
        raise PreviewRefused(preview.problems[0])
    previewer = previewer_for(action_type)
    assert previewer is not None  # a preview without problems has one
    workflow_id = (workflow or {}).get("id")
    return previewer.send_test(
        preview, (to or "").strip(), account_id, workflow_id if isinstance(workflow_id, int) else None
    )


def send_test_message(content: Content, *, account_id: int, workflow_id: int | None) -> DeliveryResult:
    """A test send through the door: purpose `test`, so no rule applies (the marketer typed the address), and
    still a row of the ledger (each click is a new message: its own key). To the typed address, never to the
    contact whose data filled it in."""
    outcome = send_message(
        key=f"test_{uuid.uuid4().hex}",
        content=content,
        account_id=account_id,
        purpose=Purpose.TEST,
        origin=Origin(workflow_id=workflow_id),
    )
    if not isinstance(outcome, Sent):  # a test is never deferred or refused by the rules; only no address is
        raise PreviewRefused(outcome.reason)
    return outcome.result


def phone_for_test(to: str) -> str:
    """The number a test SMS or call goes to, as contacts spell numbers; PreviewRefused when it is none."""
    try:
        number = normalize_phone(to)
    except Exception:
        number = ""
    if not number:
        raise PreviewRefused("Type the phone number to send the test to, e.g. +15550100000.")
    return number
