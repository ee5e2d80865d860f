"""What every step type's executor shares: the attempt it is given (`StepRun`), what it returns
(`ActionResult`), and `executor_for(step.action_type)`, which asks the registry.

Each type's executor is in its folder (`workflows/steps/<name>/executor.py`, `EXECUTOR`). Executors carry a
step out and return its response data, or raise one of the queue's classified errors (kernel.failures) so
the RetryService can decide what follows. Sending actions reach the outside world only through the door
(`send_through_the_door`: integrations.application.outbound, the sending rules and the ledger); contact
actions only through the contacts services (so their events fire and workflows chain). Config problems were
refused when the workflow was saved; what can still go wrong here is this run's data (a template that renders
an invalid URL, a tag that normalizes to nothing): a permanent error.

Each executor casts `run.step.config` to its own config type: `executor_for` picks it by the step's action
type, which is what parsed that config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast
from uuid import UUID
from zoneinfo import ZoneInfo

from accounts.application.selectors import account_time_zone
from contacts.application.clock import contact_clock
from contacts.domain.clock import ClockSource
from integrations.application.outbound import Content, Deferred, Origin, Refused, SmsText, VoiceCall, send_message
from integrations.domain.channels import EmailMessage
from integrations.domain.sending import StepSendingRules
from kernel.failures import ValidationFailure
from workflows.application.engagement import email_engagement, workflow_sending_rules
from workflows.domain.actions import WaitClock
from workflows.domain.conditions import Facts
from workflows.domain.deferral import Deferral
from workflows.domain.templates import TemplateError, TemplateRenderer, template_context
from workflows.domain.workflow import Step
from workflows.infrastructure.store import RunStore
from workflows.steps import registry


@dataclass
class StepRun:
    """Everything an executor may use for one attempt of one step."""

    execution_id: UUID
    account_id: int
    contact_id: int
    step: Step
    workflow_id: int
    workflow_name: str
    context: Mapping[str, Any]  # the run's context: event, trigger data, earlier steps' results
    now: datetime
    renderer: TemplateRenderer
    manual_retries: int = 0  # the run's retries by an operator (Execution.manual_retries)
    version_id: UUID | None = None  # the published version the run follows
    _contact: dict[str, Any] | None = field(default=None, repr=False)
    # The contact's whole row, read under its lock in this transaction (a batch of steps): update_contact
    # writes from it rather than lock and read it again.
    locked_contact_row: Mapping[str, Any] | None = field(default=None, repr=False)
    _template_context: Mapping[str, Any] | None = field(default=None, repr=False)
    _contact_time_zone: str | None = field(default=None, repr=False)

    @property
    def contact(self) -> dict[str, Any]:
        """The contact as it is now (read once per attempt, when first needed)."""
        if self._contact is None:
            self._contact = RunStore().contact(self.contact_id, self.account_id) or {}
        return self._contact

    def clock(self, which: str) -> str:
        """The IANA zone a step reads dates and times in: "contact" (the contact's clock), "account", or a name."""
        if which == WaitClock.ACCOUNT:
            return account_time_zone(self.account_id)
        if which == WaitClock.CONTACT:
            return self.contact_time_zone
        return which

    @property
    def contact_time_zone(self) -> str:
        """The contact's clock (contacts.application.clock): read once per attempt, when first needed."""
        if self._contact_time_zone is None:
            contact = self.contact
            own_or_phone = contact_clock(contact, account_time_zone="")
            if own_or_phone.source is ClockSource.ACCOUNT:  # only then is the account's zone read
                own_or_phone = contact_clock(contact, account_time_zone=account_time_zone(self.account_id))
            self._contact_time_zone = own_or_phone.time_zone
        return self._contact_time_zone

    @property
    def message_key(self) -> str:
        """The ledger's idempotency key of this step's email, SMS or call: the step's message id
        (`webhook_message_id`), the same on every automatic retry of this visit, new for a new visit or an
        operator's retry; the email's Message-ID is made from it."""
        return self.webhook_message_id

    @property
    def split_path(self) -> str:
        """The path of the last split the run went through (`<split key>:<path>`), or "": kept on the ledger's
        rows, so a split's messages can be counted per path."""
        results = self.step_results()
        for key in reversed(list(results)):
            found = results[key]
            if isinstance(found, dict) and set(found) == {"bucket", "path", "next"}:
                return f"{key}:{found['path']}"[:100]
        return ""

    @property
    def webhook_message_id(self) -> str:
        """The Standard Webhooks id of this step's message: the same on every attempt the engine makes of
        the step (its automatic retries), so receivers drop duplicates; a new one after an operator's retry
        of the FAILED run, which asks for a new delivery that a receiver must not drop
        (docs/decisions/webhook-signing.md)."""
        message = f"run_{self.execution_id.hex}_step_{self.step.index}"
        visit = self.visit
        if visit > 1:  # a loop brought the run here again: a new message, the same on each of its attempts
            message = f"{message}_visit_{visit}"
        return f"{message}_retry_{self.manual_retries}" if self.manual_retries else message

    @property
    def visit(self) -> int:
        """Which visit of this step the run is on (1 the first); runs from before the graph keep no keys: 1."""
        done = self.context.get("step_keys")
        return done.count(self.step.key) + 1 if isinstance(done, list) else 1

    def step_results(self) -> dict[str, Any]:
        """What earlier steps produced, by key (a step visited twice: its latest visit)."""
        results = list(self.context.get("steps") or [])
        keys = self.context.get("step_keys")
        if not isinstance(keys, list):  # a run from before the graph went through its steps in order
            keys = [f"step_{n}" for n in range(1, len(results) + 1)]
        return dict(zip(keys, results, strict=False))

    def facts(self, fields: Sequence[str] = ()) -> Facts:
        """What a condition of this step may read (workflows.domain.conditions). When `fields` read whether an
        email was opened or clicked (`steps.<key>.opened`), the run's engagement events are read too."""
        steps = self.step_results()
        engaged = {f.split(".")[1] for f in fields if f.startswith("steps.") and f.count(".") >= 2}
        engaged = {key for key in engaged if any(f.startswith(f"steps.{key}.{w}") for f in fields for w in _ENGAGED)}
        if engaged:
            seen = email_engagement(run_id=str(self.execution_id), contact_id=self.contact_id)
            for key in engaged:
                if key in steps:  # an email this run sent: not opened until an event says so
                    base = {"opened": False, "clicked": False, "links": []}
                    steps[key] = {**(steps[key] if isinstance(steps[key], dict) else {}), **base, **seen.get(key, {})}
        return Facts(
            contact=self.contact,
            trigger=self.context.get("trigger") or {},
            steps=steps,
            now=self.now,
            clock=lambda: ZoneInfo(self.contact_time_zone),
        )

    def template_context(self) -> Mapping[str, Any]:
        if self._template_context is None:
            self._template_context = template_context(
                contact=self.contact,
                trigger=self.context.get("trigger") or {},
                steps=list(self.context.get("steps") or []),
                event=self.context.get("event") or "",
                workflow={"id": self.workflow_id, "name": self.workflow_name},
                run={"id": str(self.execution_id), "step": self.step.index},
            )
        return self._template_context

    def text(self, source: str, what: str) -> str:
        try:
            return self.renderer.render_text(source, self._context_if_needed(source))
        except TemplateError as exc:
            raise ValidationFailure(f"{what}: {exc}") from None

    def html(self, source: str, what: str) -> str:
        try:
            return self.renderer.render_html(source, self._context_if_needed(source))
        except TemplateError as exc:
            raise ValidationFailure(f"{what}: {exc}") from None

    def _context_if_needed(self, source: str) -> Mapping[str, Any]:
        # A text with nothing to fill in never reads the contact.
        return self.template_context() if "{" in source else {}


@dataclass(frozen=True)
class ActionResult:
    data: dict[str, Any]  # the step's response data: what its log row shows (redacted, bounded)
    # What later steps read of it (`steps.<key>`), when that is not `data`: a webhook's answer as it came, where
    # `data` holds the redacted copy. Kept in the run's context, never shown (workflows.domain.logs).
    output: dict[str, Any] | None = None
    skipped: str | None = None  # why the step was not carried out (consent, no address); the run goes on
    wait_until: datetime | None = None  # a wait step: when the run moves on
    event_wait_until: datetime | None = None  # a wait_for_event step began waiting: its timeout
    next_key: str | None = None  # a deciding step: the key (or END) it chose; None: the step's own `next`
    decision: Mapping[str, Any] = field(default_factory=dict)  # what it chose and why, for the log row
    end_reason: str = ""  # why the run ends here, when next_key is END
    # Not now (a send window, a frequency cap: the door's Deferred): the engine asks the step again at its
    # `until`, without spending an attempt or a visit (workflows.domain.deferral); `data` is logged with it.
    deferred: Deferral | None = None


class ActionExecutor(Protocol):
    action_type: str
    external: bool  # reaches the outside world: runs before, not inside, the transaction that records it

    def execute(self, run: StepRun) -> ActionResult: ...


def send_through_the_door(run: StepRun, content: Content, sending: StepSendingRules) -> ActionResult:
    """A send step's message through the door (integrations.application.outbound): the sending rules of the
    account, the workflow (read now, not frozen in the version) and the step decide; the ledger records it
    under the step's message key (`message_key`: the same on every attempt, so a retry never sends a sent
    message again). Sent: its delivery is the step's data. Refused (consent, no address, suppression, a cap
    set to skip): the step is skipped and the run goes on. Deferred (a send window, a frequency cap): the
    engine asks the step again at `until`, spending no attempt (workflows.domain.deferral)."""
    outcome = send_message(
        key=run.message_key,
        content=content,
        account_id=run.account_id,
        contact_id=run.contact_id,
        workflow_rules=workflow_sending_rules(run.workflow_id),
        step_rules=sending,
        origin=Origin(
            workflow_id=run.workflow_id,
            version_id=run.version_id,
            run_id=run.execution_id,
            step_key=run.step.key,
            split_path=run.split_path,
        ),
    )
    if isinstance(outcome, Refused):
        return ActionResult({"skipped": outcome.reason, "code": outcome.code}, skipped=outcome.reason)
    if isinstance(outcome, Deferred):
        deferral = Deferral.from_verdict(outcome)
        return ActionResult({"channel": _CHANNEL_OF[type(content)], **deferral.log_data()}, deferred=deferral)
    return ActionResult(outcome.result.as_response_data())


_CHANNEL_OF: dict[type, str] = {EmailMessage: "email", SmsText: "sms", VoiceCall: "voice"}


_ENGAGED = ("opened", "clicked", "links")


def executor_for(action_type: str) -> ActionExecutor:
    """The executor of a step's action type (its folder's `EXECUTOR`). Unknown types never get here: saving
    refuses them."""
    return cast(ActionExecutor, registry.load(action_type, "executor").EXECUTOR)
