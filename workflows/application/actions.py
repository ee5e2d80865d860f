"""What every step type's executor shares: the attempt it is given (`StepRun`), what it returns
(`ActionResult`), and `executor_for(step.action_type)`, which asks the registry.

Each type's executor is in its folder (`workflows/steps/<name>/executor.py`, `EXECUTOR`). Executors carry a
step out and return its response data, or raise one of the queue's classified errors (kernel.failures) so
the RetryService can decide what follows. Sending actions reach the outside world only through the channel
factories of `integrations.application.channels`; contact actions only through the contacts services (so
their events fire and workflows chain). Config problems were refused when the workflow was saved; what can
still go wrong here is this run's data (a template that renders an invalid URL, a tag that normalizes to
nothing): a permanent error.

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
from contacts.domain.model import ConsentState
from integrations.domain import sending as sending_rules
from integrations.domain.sending import Channel, Outbound, Purpose, Refuse, combine
from kernel.failures import ValidationFailure
from workflows.application.engagement import email_engagement
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
    def webhook_message_id(self) -> str:
        """The Standard Webhooks id of this step's message: the same on every attempt the engine makes of
        the step (its automatic retries), so receivers drop duplicates; a new one after an operator's retry
        of the FAILED run, which asks for a new delivery that a receiver must not drop (DDD_NOTES)."""
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


def skip_unsendable(run: StepRun, channel: Channel, address: str) -> ActionResult | None:
    """A sending step is skipped, and the run goes on, when consent forbids it or there is nowhere to send:
    the sending rules' `consent` and `address` (integrations.domain.sending), asked as marketing (every
    workflow message is, until the door lets a workflow say otherwise)."""
    contact = run.contact
    message = Outbound(
        channel=channel,
        purpose=Purpose.MARKETING,
        key=run.webhook_message_id,
        address=contact[address] or "",
        consent=ConsentState(unsubscribed=contact["unsubscribed"], sms_opted_out=contact["sms_opted_out"]),
    )
    verdict = combine([sending_rules.consent(message), sending_rules.address(message)])
    if isinstance(verdict, Refuse):
        return ActionResult({"skipped": verdict.reason}, skipped=verdict.reason)
    return None


_ENGAGED = ("opened", "clicked", "links")


def executor_for(action_type: str) -> ActionExecutor:
    """The executor of a step's action type (its folder's `EXECUTOR`). Unknown types never get here: saving
    refuses them."""
    return cast(ActionExecutor, registry.load(action_type, "executor").EXECUTOR)
