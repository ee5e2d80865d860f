"""Starting runs: for one contact (`start_run`), for many at once (`start_runs`), and from an event (`record_event`).

Every start locks the workflow's account first, so starts for one account
are serialized and the run limit and the re-enrollment rule are exact. The
new run's first step is queued in the same transaction: a run exists if and
only if its first job does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Model

from jobs.public import enqueue_many
from jobs.public.storage import uuid7
from kernel.failures import format_error
from kernel.storable_json import find_unstorable
from workflows.application.chain import current_origin
from workflows.application.definitions import LoadedVersion, load_version
from workflows.application.errors import ContactNotFound, WorkflowNotFound
from workflows.application.runs.moves import enact, step_job
from workflows.application.trigger_cache import event_candidates, trigger_cache
from workflows.domain.enrollment import NO_RUNS, ChainOrigin, Check, History, enrollment_gate, reads_history
from workflows.domain.errors import IdempotencyConflict, WorkflowValidationError
from workflows.domain.execution import Execution
from workflows.domain.triggers import EVENT_NAME, TAG_EVENTS, Reenrollment
from workflows.domain.workflow import WorkflowStatus
from workflows.infrastructure.models import TriggerSource, WorkflowExecution
from workflows.infrastructure.store import RUN_COLUMNS, RunRow, RunStore

log = logging.getLogger("relay.workflows")

MAX_TRIGGER_DATA_BYTES = 64 * 1024
MAX_IDEMPOTENCY_KEY = 200
MAX_BULK_START = 10_000


@dataclass(frozen=True)
class RunStarted:
    execution: WorkflowExecution
    created: bool  # False: the idempotency key gave back the run it started before


@dataclass(frozen=True)
class BulkStarted:
    execution_ids: list[UUID]  # the runs started, in the order of the contacts given
    skipped: list[tuple[int, str]]  # (contact id, why it was not enrolled)


@dataclass(frozen=True)
class SkippedEnrollment:
    workflow_id: int
    reason: str


@dataclass(frozen=True)
class EventOutcome:
    started: list[WorkflowExecution]
    skipped: list[SkippedEnrollment]  # matching workflows that did not start, and why


def start_run(
    *,
    workflow_id: int,
    contact_id: int,
    account_id: int | None = None,
    trigger_data: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    source: str = TriggerSource.API,
    started_by_id: int | None = None,
) -> RunStarted:
    """Start a run of the workflow's latest version for one contact.

    The same idempotency key (per account) gives back the same run. With
    the account's limit of runs QUEUED or ACTIVE reached, raises
    ConcurrentExecutionLimitError and stores nothing. `account_id`, when
    given, scopes the lookup: another account's workflow is not found.
    """
    data = _check_trigger_data(trigger_data)
    key = _check_idempotency_key(idempotency_key)
    if source not in TriggerSource.values:
        raise WorkflowValidationError.single("source", f"must be one of: {', '.join(TriggerSource.values)}")
    if not isinstance(workflow_id, int) or isinstance(workflow_id, bool):
        raise WorkflowNotFound(workflow_id)
    if not isinstance(contact_id, int) or isinstance(contact_id, bool):
        raise ContactNotFound(contact_id)
    store = RunStore()
    with transaction.atomic():
        # The account's row lock serializes starts for the account: the limit and re-enrollment are exact.
        found = store.lock_for_start(workflow_id, account_id, contact_id)
        if found is None:
            raise WorkflowNotFound(workflow_id)
        workflow_account, limit, status, version_id, contact_ok = found
        if not contact_ok:
            raise ContactNotFound(contact_id)
        if key is not None:
            existing = store.run_by_idempotency_key(workflow_account, key)
            if existing is not None:
                run_id, existing_workflow, existing_contact = existing
                if existing_workflow != workflow_id or existing_contact != contact_id:
                    raise IdempotencyConflict(
                        f"idempotency key {key!r} was already used for run {run_id} of another workflow or contact"
                    )
                return RunStarted(WorkflowExecution.objects.get(pk=run_id), created=False)
        version = load_version(version_id) if version_id is not None else None
        rule = version.definition.reenrollment if version is not None else None
        origin = current_origin()
        refusal = enrollment_gate(
            workflow_id=workflow_id,
            status=status,
            reenrollment=rule,
            origin=origin,
            max_chain_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH,
            history=_history(store, workflow_id, contact_id, rule),
            in_progress=store.counted_runs(workflow_account),
            limit=limit,
        )
        if refusal is not None:
            raise refusal.error
        assert version is not None  # the gate refuses a workflow without a published version
        execution = _create_run(
            store,
            account_id=workflow_account,
            version=version,
            contact_id=contact_id,
            trigger_data=data,
            event="",
            source=source,
            idempotency_key=key,
            origin=origin,
            started_by_id=started_by_id,
        )
    return RunStarted(execution, created=True)


def start_runs(
    *,
    workflow_id: int,
    contact_ids: Sequence[int],
    account_id: int | None = None,
    trigger_data: Mapping[str, Any] | None = None,
    source: str = TriggerSource.API,
    started_by_id: int | None = None,
) -> BulkStarted:
    """Enroll many contacts at once (a list, a segment) in one transaction.

    Contacts the re-enrollment rule keeps out are skipped and reported.
    Against the account's limit it is all or nothing: if the runs to start
    do not all fit, ConcurrentExecutionLimitError is raised and nothing is
    stored. An unknown contact refuses the whole call.
    """
    ids = _check_contact_ids(contact_ids)
    data = _check_trigger_data(trigger_data)
    if source not in TriggerSource.values:
        raise WorkflowValidationError.single("source", f"must be one of: {', '.join(TriggerSource.values)}")
    store = RunStore()
    with transaction.atomic():
        found = store.workflow(workflow_id, account_id) if isinstance(workflow_id, int) else None
        if found is None:
            raise WorkflowNotFound(workflow_id)
        _, workflow_account, status, version_id = found
        present = store.contacts_in_account(ids, workflow_account)
        unknown = [contact_id for contact_id in ids if contact_id not in present]
        if unknown:
            shown = ", ".join(str(c) for c in unknown[:20]) + (" ..." if len(unknown) > 20 else "")
            raise WorkflowValidationError.single("contact_ids", f"no such contacts in this account: {shown}")
        limit = store.lock_account(workflow_account)
        version = load_version(version_id) if version_id is not None else None
        rule = version.definition.reenrollment if version is not None else None
        histories = _histories(store, workflow_id, ids, rule)
        origin = current_origin()
        in_progress = store.counted_runs(workflow_account)
        eligible: list[int] = []
        skipped: list[tuple[int, str]] = []
        for contact_id in ids:
            refusal = enrollment_gate(
                workflow_id=workflow_id,
                status=status,
                reenrollment=rule,
                origin=origin,
                max_chain_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH,
                history=histories.get(contact_id, NO_RUNS),
                in_progress=in_progress,
                limit=limit,
                starting=len(eligible),
            )
            if refusal is None:
                eligible.append(contact_id)
            elif refusal.check is Check.REENROLLMENT:
                skipped.append((contact_id, refusal.reason))
            else:
                raise refusal.error  # not active, the chain guard, the limit: the whole list or nothing
        assert version is not None  # the gate refuses a workflow without a published version
        rows, extras, specs = [], [], []
        for contact_id in eligible:
            run, _ = Execution.start(
                step_count=len(version.definition.steps), trigger_data=data, first_key=version.definition.steps[0].key
            )
            row = _new_row(run, account_id=workflow_account, version=version, contact_id=contact_id, origin=origin)
            rows.append(row)
            extras.append(
                _extra(idempotency_key=None, source=source, event="", origin=origin, started_by_id=started_by_id)
            )
            specs.append(step_job(row, run.current_step_index))
        for row, job_id in zip(rows, enqueue_many(specs), strict=True):
            row.next_job_id = job_id
        store.insert_runs(rows, extras)
    return BulkStarted([row.id for row in rows], skipped)


def record_event(
    *,
    account: Model | int,  # an Account, or its id
    contact: Model | int,  # a Contact, or its id
    name: str,
    data: Mapping[str, Any] | None = None,
) -> EventOutcome:
    """Start every active workflow whose trigger matches this event for this contact.

    Each is subject to its contact filter, its re-enrollment rule, the
    chain guard and the account's run limit; a workflow that does not
    start is reported in `skipped` with the reason (an event is never
    refused as a whole: the change that caused it must not fail because a
    workflow cannot start). The contact is looked up only when a workflow
    matches (this runs for every contact change): an API endpoint resolves
    the contact within the account first.
    """
    account_id = account if isinstance(account, int) else account.pk
    contact_id = contact if isinstance(contact, int) else contact.pk
    if not isinstance(name, str) or not EVENT_NAME.fullmatch(name):
        raise WorkflowValidationError.single(
            "name", "an event name is letters, digits and . _ : - (at most 100), e.g. order.paid"
        )
    payload = _check_trigger_data(data, path="data")
    tag = payload.get("tag") if name in TAG_EVENTS else None
    # Joins the caller's transaction without a savepoint: events come from inside contact changes, on the
    # hot path of every tag and update step, and nothing here needs to be undone apart from the caller.
    store = RunStore()
    with transaction.atomic(savepoint=False):
        matches = event_candidates(store, account_id, name, tag if name in TAG_EVENTS else None)
        if not matches:
            return EventOutcome([], [])
        facts = store.contact(contact_id, account_id)
        if facts is None:
            raise ContactNotFound(contact_id)
        event = _Event(store, account_id, contact_id, name, payload, facts, current_origin(), [w for w, _ in matches])
        for workflow_id, version_id in matches:
            # Each candidate on its own: a workflow that cannot be considered (a version that does not
            # load, a bug) is skipped and logged, never raised into the contact change that emitted the
            # event (it runs without a savepoint, so an exception would doom the caller's transaction).
            # A database error is different: the transaction is already doomed, so it propagates.
            try:
                _enroll_on_event(event, workflow_id, version_id)
            except DatabaseError:
                raise
            except Exception as exc:
                log.error(
                    "event %s for contact %s: workflow %s skipped, it could not be started: %s",
                    name,
                    contact_id,
                    workflow_id,
                    format_error(exc),
                )
                event.skip(workflow_id, "the workflow could not be started (see the logs)")
    return event.outcome


def _enroll_on_event(event: _Event, workflow_id: int, version_id: UUID) -> None:
    """Start one candidate workflow for the event's contact, or report why not."""
    version = load_version(version_id)
    if event.left_out(workflow_id, version):
        return
    event.lock_account()
    status, current_version_id = event.states.get(workflow_id, ("", None))
    if status == WorkflowStatus.ACTIVE and current_version_id not in (None, version_id):
        trigger_cache.forget(str(event.account_id))  # published again since the candidates were read
        version = load_version(current_version_id)
        if event.left_out(workflow_id, version):
            return
    rule = version.definition.reenrollment if current_version_id is not None else None
    refusal = enrollment_gate(
        workflow_id=workflow_id,
        status=status,
        reenrollment=rule,
        origin=event.origin,
        max_chain_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH,
        history=_history(event.store, workflow_id, event.contact_id, rule),
        in_progress=event.in_progress,
        limit=event.limit,
    )
    if refusal is not None and refusal.check is Check.ACTIVE:  # a stale cache's candidate: nothing to report
        log.info("event %s: workflow %s is %s now; not started", event.name, workflow_id, status or "gone")
        trigger_cache.forget(str(event.account_id))
    elif refusal is not None:
        log.warning(
            "event %s for contact %s did not start workflow %s: %s",
            event.name,
            event.contact_id,
            workflow_id,
            refusal.reason,
        )
        event.skip(workflow_id, refusal.reason)
    else:
        run = _create_run(
            event.store,
            account_id=event.account_id,
            version=version,
            contact_id=event.contact_id,
            trigger_data=event.payload,
            event=event.name,
            source=TriggerSource.EVENT,
            idempotency_key=None,
            origin=event.origin,
            started_by_id=None,
        )
        event.outcome.started.append(run)
        event.in_progress += 1


@dataclass
class _Event:
    """An event being recorded: what each candidate workflow is judged against, and what came of it."""

    store: RunStore
    account_id: int
    contact_id: int
    name: str
    payload: dict[str, Any]
    facts: dict[str, Any]  # the contact as the trigger's filter sees it
    origin: ChainOrigin | None
    candidates: list[int]
    outcome: EventOutcome = field(default_factory=lambda: EventOutcome([], []))
    locked: bool = False  # the account's lock is taken once, before the first enrollment check
    limit: int = 0
    in_progress: int = 0
    states: dict[int, tuple[str, UUID | None]] = field(default_factory=dict)

    def lock_account(self) -> None:
        if self.locked:
            return
        self.locked = True
        self.limit = self.store.lock_account(self.account_id)
        self.in_progress = self.store.counted_runs(self.account_id)
        # The candidates may come from a worker's cache: read what they are now, under the account lock
        # (and, on PostgreSQL, a share lock: a pause commits before or after us).
        self.states = self.store.workflow_states(self.candidates)

    def left_out(self, workflow_id: int, version: LoadedVersion) -> bool:
        """Whether the version's trigger does not take this event for this contact (reported if worth it)."""
        trigger = version.definition.trigger
        if not trigger.matches_event(self.name, self.payload):
            return True  # not its event: nothing worth reporting
        if not trigger.matches_contact(self.facts):
            self.skip(workflow_id, "the contact does not match the trigger's filter")
            return True
        return False

    def skip(self, workflow_id: int, reason: str) -> None:
        self.outcome.skipped.append(SkippedEnrollment(workflow_id, reason))


def _create_run(
    store: RunStore,
    *,
    account_id: int,
    version: LoadedVersion,
    contact_id: int,
    trigger_data: dict[str, Any],
    event: str,
    source: str,
    idempotency_key: str | None,
    origin: ChainOrigin | None,
    started_by_id: int | None,
) -> WorkflowExecution:
    run, move = Execution.start(
        step_count=len(version.definition.steps),
        trigger_data=trigger_data,
        event=event,
        first_key=version.definition.steps[0].key,
    )
    row = _new_row(run, account_id=account_id, version=version, contact_id=contact_id, origin=origin)
    enact(row, run, move)
    extra = _extra(
        idempotency_key=idempotency_key, source=source, event=event, origin=origin, started_by_id=started_by_id
    )
    created_at = store.insert_run(row, **extra)
    # The new run as a model instance for the caller, built from what was written (no read back).
    execution = WorkflowExecution(
        **{name: getattr(row, name) for name in RUN_COLUMNS}, **extra, created_at=created_at, updated_at=created_at
    )
    execution._state.adding = False
    execution._state.db = store.using
    return execution


def _new_row(
    run: Execution, *, account_id: int, version: LoadedVersion, contact_id: int, origin: ChainOrigin | None
) -> RunRow:
    run.context_changed = False  # a new row is written whole
    return RunRow(
        id=uuid7(),
        account_id=account_id,
        workflow_id=version.workflow_id,
        version_id=version.id,
        contact_id=contact_id,
        status=run.status.value,
        current_step_index=run.current_step_index,
        current_step_key=run.current_step_key,
        end_reason="",
        step_count=run.step_count,
        retry_count=run.retry_count,
        manual_retries=0,
        context=run.context,
        resume_at=None,
        paused_from="",
        last_error="",
        last_error_category="",
        next_job_id=None,
        depth=origin.depth + 1 if origin else 0,
        started_at=None,
        completed_at=None,
    )


def _extra(
    *, idempotency_key: str | None, source: str, event: str, origin: ChainOrigin | None, started_by_id: int | None
) -> dict[str, Any]:
    """A new run's columns that the hot path never changes."""
    return {
        "idempotency_key": idempotency_key,
        "trigger_source": source,
        "trigger_event": event,
        "parent_id": origin.execution_id if origin else None,
        "created_by_id": started_by_id,
    }


def _check_contact_ids(contact_ids: Any) -> list[int]:
    if isinstance(contact_ids, str | bytes) or not isinstance(contact_ids, Sequence):
        raise WorkflowValidationError.single("contact_ids", "must be a list of contact ids")
    if not contact_ids:
        raise WorkflowValidationError.single("contact_ids", "must not be empty")
    if len(contact_ids) > MAX_BULK_START:
        raise WorkflowValidationError.single("contact_ids", f"must have at most {MAX_BULK_START:,} ids")
    if any(isinstance(c, bool) or not isinstance(c, int) for c in contact_ids):
        raise WorkflowValidationError.single("contact_ids", "must hold whole numbers")
    return list(dict.fromkeys(contact_ids))  # each contact once, in the order given


def _check_trigger_data(data: Mapping[str, Any] | None, path: str = "trigger_data") -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise WorkflowValidationError.single(path, "must be a JSON object")
    found = find_unstorable(dict(data), path)  # a NUL from the admin's "Start a run", an SMS reply, an event
    if found is not None:
        raise WorkflowValidationError.single(found.path, found.reason)
    try:
        encoded = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        raise WorkflowValidationError.single(path, "must be plain JSON") from None
    if len(encoded.encode()) > MAX_TRIGGER_DATA_BYTES:
        raise WorkflowValidationError.single(path, f"must be at most {MAX_TRIGGER_DATA_BYTES:,} bytes as JSON")
    return json.loads(encoded)  # a private copy: later changes by the caller do not reach the run


def _check_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 0 < len(key) <= MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise WorkflowValidationError.single(
            "idempotency_key", f"must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters"
        )
    return key


def _history(store: RunStore, workflow_id: int, contact_id: int, rule: Reenrollment | None) -> History:
    """The contact's earlier runs of the workflow, read only when its re-enrollment rule looks at them."""
    if not reads_history(rule):
        return NO_RUNS
    has_any, has_unfinished = store.enrollment(workflow_id, contact_id)
    return History(has_any_run=has_any, has_unfinished_run=has_unfinished)


def _histories(
    store: RunStore, workflow_id: int, contact_ids: list[int], rule: Reenrollment | None
) -> dict[int, History]:
    """`_history` of many contacts in few queries; a contact without runs of the workflow is left out."""
    if not reads_history(rule):
        return {}
    return {
        contact_id: History(has_any_run=True, has_unfinished_run=unfinished)
        for contact_id, unfinished in store.enrollments(workflow_id, contact_ids).items()
    }


# The trigger data's rule (a JSON object of at most 64 KB), for the other ways an event comes in.
check_trigger_data = _check_trigger_data
