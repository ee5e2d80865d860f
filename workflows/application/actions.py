"""One ActionExecutor per action type, picked by `executor_for(step.action_type)`.

Executors carry a step out and return its response data, or raise one of
the queue's classified errors (kernel.failures) so the RetryService can
decide what follows. Sending actions reach the outside world only through
the channel factories of `integrations.application.channels`; contact
actions only through the contacts services (so their events fire and
workflows chain). Config problems were refused when the workflow was saved;
what can still go wrong here is this run's data (a template that renders an
invalid URL, a tag that normalizes to nothing): a permanent error.

Each executor casts `run.step.config` to its own config type: `executor_for`
picks it by the step's action type, which is what parsed that config.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast
from uuid import UUID
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.db import IntegrityError

from accounts.application.selectors import account_time_zone
from contacts.application.clock import contact_clock
from contacts.application.services import contact_add_tag, contact_remove_tag, contact_update
from contacts.domain.clock import ClockSource
from contacts.domain.model import ConsentState, ContactError, normalize_tag
from integrations.application import channels
from integrations.domain import sending as sending_rules
from integrations.domain.channels import EmailMessage, WebhookRequest
from integrations.domain.redaction import REDACTED
from integrations.domain.sending import Outbound, Purpose, Refuse, combine
from integrations.domain.tracking import EmailTracking
from kernel.failures import ValidationFailure
from kernel.local_time import local_instant, next_time_of_day
from workflows.application.engagement import email_engagement, email_tracking_enabled, step_key
from workflows.domain.actions import (
    END,
    ENDED_BY_STEP,
    SENDING_CHANNELS,
    SMS_MAX_LENGTH,
    ActionType,
    BranchConfig,
    SendEmailConfig,
    SendSmsConfig,
    SendVoiceConfig,
    SplitConfig,
    TagConfig,
    UpdateContactConfig,
    WaitClock,
    WaitConfig,
    WaitForEventConfig,
    WebhookConfig,
    http_url_problem,
    parse_wait_until,
    split_bucket,
)
from workflows.domain.conditions import Condition, ConditionOp, Facts, all_hold
from workflows.domain.deferral import Deferral
from workflows.domain.execution import StepOutcome
from workflows.domain.redaction import answer_step
from workflows.domain.templates import TemplateError, TemplateRenderer, contact_view, render_tree, template_context
from workflows.domain.waits import resolve as resolve_wait
from workflows.domain.workflow import Step
from workflows.infrastructure.models import ExecutionLog
from workflows.infrastructure.store import RunStore
from workflows.infrastructure.waits import WaitStore


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
    action_type: ActionType
    external: bool  # reaches the outside world: runs before, not inside, the transaction that records it

    def execute(self, run: StepRun) -> ActionResult: ...


def _skip(run: StepRun, address: str) -> ActionResult | None:
    """A sending step is skipped, and the run goes on, when consent forbids it or there is nowhere to send:
    the sending rules' `consent` and `address` (integrations.domain.sending), asked as marketing (every
    workflow message is, until the door lets a workflow say otherwise)."""
    contact = run.contact
    message = Outbound(
        channel=SENDING_CHANNELS[run.step.action_type],
        purpose=Purpose.MARKETING,
        key=run.webhook_message_id,
        address=contact[address] or "",
        consent=ConsentState(unsubscribed=contact["unsubscribed"], sms_opted_out=contact["sms_opted_out"]),
    )
    verdict = combine([sending_rules.consent(message), sending_rules.address(message)])
    if isinstance(verdict, Refuse):
        return ActionResult({"skipped": verdict.reason}, skipped=verdict.reason)
    return None


class SendEmail:
    action_type = ActionType.SEND_EMAIL
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        if skip := _skip(run, "email"):
            return skip
        config = cast(SendEmailConfig, run.step.config)
        subject = " ".join(run.text(config.subject, "subject").split())  # one line, always
        message = EmailMessage(
            to=run.contact["email"],
            subject=subject,
            text=run.text(config.text, "text"),
            html=run.html(config.html, "html") if config.html else None,
            account_id=run.account_id,
            contact_id=run.contact_id,
            headers={"X-Relay-Run": str(run.execution_id)},
            tracking=(
                EmailTracking(run_id=str(run.execution_id), step_key=step_key(run.step))
                if email_tracking_enabled(run.workflow_id)
                else None
            ),
        )
        return ActionResult(channels.email_channel().send_email(message).as_response_data())


class SendSms:
    action_type = ActionType.SEND_SMS
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        if skip := _skip(run, "phone"):
            return skip
        config = cast(SendSmsConfig, run.step.config)
        body = run.text(config.body, "body").strip()
        if not body:
            raise ValidationFailure("body: the message is empty once filled in")
        if len(body) > SMS_MAX_LENGTH:
            raise ValidationFailure(f"body: the message is longer than {SMS_MAX_LENGTH} characters once filled in")
        result = channels.sms_channel().send_sms(
            to=run.contact["phone"], body=body, account_id=run.account_id, contact_id=run.contact_id
        )
        return ActionResult(result.as_response_data())


class SendVoice:
    action_type = ActionType.SEND_VOICE
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        if skip := _skip(run, "phone"):
            return skip
        config = cast(SendVoiceConfig, run.step.config)
        message = run.text(config.message, "message").strip() if config.message else None
        if config.message and not message:
            raise ValidationFailure("message: the message is empty once filled in")
        result = channels.voice_channel().place_call(
            to=run.contact["phone"], message=message, recording_url=config.recording_url, account_id=run.account_id
        )
        return ActionResult(result.as_response_data())


class Webhook:
    action_type = ActionType.WEBHOOK
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WebhookConfig, run.step.config)
        url = run.text(config.url, "url").strip()
        problem = http_url_problem(url)
        if problem:
            raise ValidationFailure(f"url: once filled in, it {problem}")
        headers = {}
        for name, value in config.headers:
            rendered = run.text(value, f"headers.{name}")
            if "\r" in rendered or "\n" in rendered:
                raise ValidationFailure(f"headers.{name}: must be on one line once filled in")
            headers[name] = rendered
        if config.method == "GET":
            body = None
        elif config.body is not None:
            body = render_tree(config.body, lambda text: run.text(text, "body"))
        else:
            body = self.envelope(run)
        response = channels.webhook_client().send(
            WebhookRequest(
                method=config.method,
                url=url,
                headers=headers,
                body=body,
                message_id=run.webhook_message_id,
                account_id=run.account_id,
                secret_names=config.secrets,
            )
        )
        # Two copies: the log row shows the redacted one; conditions and templates read the answer as it came.
        data = response.as_response_data()
        if response.body and not response.body_truncated:
            with contextlib.suppress(ValueError):
                data["json"] = json.loads(response.body)
        output = {**data, "body": response.text}
        output.pop("json", None)
        if response.text and not response.text_truncated:
            with contextlib.suppress(ValueError):  # `steps.<key>.body.plan`, `{{ steps.N.json.plan }}`
                output["json"] = json.loads(response.text)
        return ActionResult(data, output=output)

    @staticmethod
    def envelope(run: StepRun) -> dict[str, Any]:
        """What a webhook step sends when its config gives no body."""
        return {
            "type": "workflow.step",
            "run_id": str(run.execution_id),
            "workflow": {"id": run.workflow_id, "name": run.workflow_name},
            "step": {"index": run.step.index, "name": run.step.label},
            "event": run.context.get("event") or "",
            "trigger": run.context.get("trigger") or {},
            "contact": contact_view(run.contact),
        }


class Wait:
    """For a duration; until an instant; until a date-time or date on a clock; until the next time of day on a
    clock. The clock (`time_zone`) is the contact's (its own zone, else its phone number's, else the
    account's), the account's or a named zone; DST is read by kernel.local_time (a time in a gap is the jump,
    a repeated time its first occurrence)."""

    action_type = ActionType.WAIT
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WaitConfig, run.step.config)
        zone: str | None = None
        if config.seconds is not None:
            until = run.now + timedelta(seconds=config.seconds)
        elif config.time_of_day is not None:
            zone = run.clock(config.time_zone)
            until = next_time_of_day(run.now, config.time_of_day, ZoneInfo(zone))
        else:
            text = run.text(config.until or "", "until").strip()
            try:
                moment = parse_wait_until(text)
            except ValueError as exc:
                raise ValidationFailure(f"until: {text[:100]!r} is not an ISO 8601 date or date-time ({exc})") from None
            if moment.tzinfo is not None:
                until = moment
            else:
                zone = run.clock(config.time_zone)
                until = local_instant(moment, ZoneInfo(zone))
        data: dict[str, Any] = {"resume_at": until.isoformat()}
        if zone is not None:
            data["time_zone"] = zone
        return ActionResult(data, wait_until=until)


class UpdateContact:
    action_type = ActionType.UPDATE_CONTACT
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(UpdateContactConfig, run.step.config)
        fields: dict[str, Any] = {name: run.text(value, f"fields.{name}").strip() for name, value in config.fields}
        if config.custom_fields:
            fields["custom_fields"] = {
                key: render_tree(value, _custom_field_text(run, key)) for key, value in config.custom_fields
            }
        try:
            contact = contact_update(contact_id=run.contact_id, fields=fields, locked_row=run.locked_contact_row)
        except ContactError as exc:
            raise ValidationFailure(f"{exc.field}: {exc.reason}") from None
        except ValidationError as exc:
            problems = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in exc.message_dict.items())
            raise ValidationFailure(problems) from None
        except IntegrityError:
            raise ValidationFailure("email: another contact of this account already has this address") from None
        return ActionResult({"updated": sorted(fields), "contact_id": contact.pk})


def _custom_field_text(run: StepRun, key: str) -> Callable[[str], str]:
    return lambda text: run.text(text, f"custom_fields.{key}")


class _TagAction:
    add: bool

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(TagConfig, run.step.config)
        try:
            tag = normalize_tag(run.text(config.tag, "tag"))
            if self.add:
                _, changed = contact_add_tag(contact_id=run.contact_id, tag=tag)
            else:
                _, changed = contact_remove_tag(contact_id=run.contact_id, tag=tag)
        except ContactError as exc:
            raise ValidationFailure(f"tag: {exc.reason}") from None
        return ActionResult({"tag": tag, "added" if self.add else "removed": changed})


class AddTag(_TagAction):
    action_type = ActionType.ADD_TAG
    external = False
    add = True


class RemoveTag(_TagAction):
    action_type = ActionType.REMOVE_TAG
    external = False
    add = False


_ENGAGED = ("opened", "clicked", "links")


class BranchStep:
    """The first branch whose conditions all hold, else the default; the values that chose it are logged."""

    action_type = ActionType.BRANCH
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(BranchConfig, run.step.config)
        facts = run.facts([c.field for branch in config.branches for c in branch.conditions])
        values: dict[str, Any] = {}
        taken = None
        for branch in config.branches:
            for condition in branch.conditions:
                values.setdefault(condition.field, condition.lookup(facts))
            if all_hold(branch.conditions, facts):
                taken = branch
                break
        target = taken.next if taken else config.default
        name = taken.name if taken else None
        values = shown_values(run.execution_id, values)
        decision = {"kind": "branch", "branch": name, "default": taken is None, "values": values, "next": target}
        return ActionResult(
            {"branch": name, "default": taken is None, "next": target},
            next_key=target,
            decision=decision,
            end_reason=ENDED_BY_STEP if target == END else "",
        )


def shown_values(execution_id: UUID, values: dict[str, Any]) -> dict[str, Any]:
    """The values a decision logs, as the run's history may show them: a value read from a step's answer
    (`steps.<key>.body...`, which conditions read as the receiver sent it) is logged as that step's log row
    shows it, so a decision never shows what the row hides (`[redacted]` where the row has no such value)."""
    answer_fields = [f for f in values if answer_step(f) is not None]
    if not answer_fields:
        return values
    keys = {answer_step(f) for f in answer_fields}
    shown_rows = (
        ExecutionLog.objects.filter(execution_id=execution_id, step_key__in=keys, outcome=StepOutcome.SUCCEEDED)
        .order_by("id")
        .values_list("step_key", "response_data")
    )
    shown = Facts(contact={}, steps=dict(shown_rows))  # a step visited twice: its latest row, as conditions read
    return {
        field: _as_shown(Condition(field, ConditionOp.EXISTS).lookup(shown), value) if field in answer_fields else value
        for field, value in values.items()
    }


def _as_shown(shown: Any, value: Any) -> Any:
    return shown if shown is not None or value is None else REDACTED


class SplitStep:
    """A weighted path by the run's bucket: a hash of the run id, so a retry or a crash keeps the path."""

    action_type = ActionType.SPLIT
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(SplitConfig, run.step.config)
        bucket = split_bucket(run.execution_id, run.step.key)
        path = config.path_for(bucket)
        decision = {"kind": "split", "bucket": bucket, "path": path.name, "next": path.next}
        return ActionResult(
            {"bucket": bucket, "path": path.name, "next": path.next},
            next_key=path.next,
            decision=decision,
            end_reason=ENDED_BY_STEP if path.next == END else "",
        )


class EndStep:
    action_type = ActionType.END
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        return ActionResult({"ended": True}, next_key=END, decision={"kind": "end"}, end_reason=ENDED_BY_STEP)


class WaitForEventStep:
    """Wait until the event happens to the contact, or the timeout: the run stays on this step, WAITING.

    Carried out when the run reaches the step (the wait begins: its row in the wait store, and the timeout's
    job), and again whenever the step is run while its wait is pending (a resume after a pause, a retry):
    then the wait store says whether the event came (remembered while paused) or the time is up, and the
    run goes on (`next`, or `on_timeout`), or it waits the remainder. An event or the timeout that comes
    while the run waits is handled by `runs.waiting`, without running the step again.
    """

    action_type = ActionType.WAIT_FOR_EVENT
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WaitForEventConfig, run.step.config)
        store = WaitStore()
        wait = store.lock(run.execution_id)
        if wait is not None and wait.step_key == run.step.key:
            outcome = resolve_wait(wait.recorded, wait.timeout_at, run.now)
            if outcome is not None:
                store.forget(run.execution_id)
                return ActionResult(
                    outcome.result(),
                    next_key=None if outcome.happened else config.on_timeout,
                    decision=outcome.decision(),
                )
            until = wait.timeout_at  # the remainder
        else:
            until = run.now + timedelta(seconds=config.timeout)
            store.begin(
                execution_id=run.execution_id,
                account_id=run.account_id,
                contact_id=run.contact_id,
                event=config.event,
                match=dict(config.match or {}),
                step_key=run.step.key,
                timeout_at=until,
            )
        return ActionResult({"waiting_for": config.event, "timeout_at": until.isoformat()}, event_wait_until=until)


EXECUTORS: dict[ActionType, ActionExecutor] = {
    executor.action_type: executor
    for executor in (
        SendEmail(),
        SendSms(),
        SendVoice(),
        Webhook(),
        Wait(),
        UpdateContact(),
        AddTag(),
        RemoveTag(),
        BranchStep(),
        SplitStep(),
        EndStep(),
        WaitForEventStep(),
    )
}


def executor_for(action_type: ActionType | str) -> ActionExecutor:
    """The executor for a step's action type. Unknown types never get here: saving refuses them."""
    return EXECUTORS[ActionType(action_type)]
