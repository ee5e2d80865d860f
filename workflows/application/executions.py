"""ExecutionService: start runs, carry them step by step, and let operators pause, resume, cancel and retry them.

How a step is carried out (the `workflow_step` job):

1. Only the job the run names (`next_job_id`) may move it, and only at its
   current step: a stale or duplicate job does nothing. A paused run lets go
   of the step; resume queues it again.
2. Internal actions (wait, update_contact, add_tag, remove_tag) run inside
   the transaction that locks the run, so the change, the log row, the run's
   move, the next job and this job's completion commit together: exactly
   once. (The contacts service an action calls is its own atomic block: the
   savepoint that undoes a failed change, leaving the transaction usable to
   record the failure.)
3. External actions (email, SMS, voice, webhook) cannot be rolled back: the
   run is marked ACTIVE and committed first (a compare-and-set on what was
   read), the action runs outside any transaction, then one transaction locks
   the run again, writes the log row, moves the run, queues the next job (the
   next step, a retry at its backoff, or nothing if the run was paused or
   cancelled meanwhile) and marks this job completed. A crash between the
   action and that commit re-runs the action: at-least-once towards the
   outside world; the webhook id is stable per run and step, so receivers can
   drop the duplicate. If the database refuses that record (data it cannot
   hold), the step is recorded FAILED without the refused data instead.
4. A step or resume job that ends dead or failed on the queue (its handler
   raised every time, or its worker died on the last attempt) fails its run
   (`job_died`, the queue's dead-letter hook): no run waits forever for a job
   that will never come.

Reads and writes of runs on this path are plain SQL (workflows.infrastructure.store).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.utils import timezone

from accounts.infrastructure.models import Account
from contacts.infrastructure.models import Contact
from integrations.domain.channels import failure_details
from jobs.application.context import JobContext, complete_all
from jobs.application.operations import cancel_pending_jobs
from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.application.registry import BatchItem
from jobs.domain.errors import LeaseLost, format_error, truncate
from jobs.domain.ids import uuid7
from jobs.domain.retry import RetryPolicy
from workflows.application.actions import ActionExecutor, ActionResult, StepRun, executor_for
from workflows.application.chain import caused_by, current_origin
from workflows.application.definitions import LoadedVersion, load_version
from workflows.application.errors import ContactNotFound, ExecutionNotFound, WorkflowNotFound
from workflows.domain.errors import (
    ConcurrentExecutionLimitError,
    EnrollmentRefused,
    IdempotencyConflict,
    OutcomeNotStored,
    WorkflowNotActive,
    WorkflowValidationError,
)
from workflows.domain.execution import (
    Execution,
    ExecutionStatus,
    MoveKind,
    NextMove,
    StepGate,
    StepOutcome,
)
from workflows.domain.logs import bounded_response
from workflows.domain.retry import RetryService
from workflows.domain.templates import TemplateRenderer
from workflows.domain.triggers import (
    EVENT_NAME,
    TAG_EVENTS,
    ChainOrigin,
    Reenrollment,
    chain_refusal,
    enrollment_refusal,
)
from workflows.domain.workflow import Step, WorkflowStatus
from workflows.infrastructure.models import TriggerSource, WorkflowExecution, WorkflowVersion
from workflows.infrastructure.store import RUN_COLUMNS, RunRow, RunStore, trigger_cache
from workflows.infrastructure.templates import renderer as default_renderer

log = logging.getLogger("relay.workflows")

STEP_HANDLER = "workflow_step"
RESUME_HANDLER = "workflow_resume"
MAX_TRIGGER_DATA_BYTES = 64 * 1024
MAX_IDEMPOTENCY_KEY = 200
MAX_BULK_START = 10_000


JOB_DIED_LOCK_WAIT_SECONDS = 5.0
EXTERNAL_BATCH_SECONDS = 1.0  # a batch starts no external action after this long (see _run_external_steps)


def default_retry_service() -> RetryService:
    return RetryService(
        RetryPolicy(
            max_attempts=int(settings.WORKFLOW_STEP_MAX_ATTEMPTS),
            base_delay=float(settings.WORKFLOW_STEP_BASE_DELAY),
            max_delay=float(settings.WORKFLOW_STEP_MAX_DELAY),
            jitter=float(settings.WORKFLOW_STEP_JITTER),
        )
    )


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


@dataclass(frozen=True)
class _Attempt:
    result: ActionResult | None
    error: BaseException | None
    duration_ms: int


class ExecutionService:
    def __init__(
        self,
        *,
        retry: RetryService | None = None,
        renderer: TemplateRenderer | None = None,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.retry_service = retry or default_retry_service()
        self.renderer = renderer or default_renderer
        self.clock = clock

    # --- starting runs -----------------------------------------------------------------------
    def start(
        self,
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
            if status != WorkflowStatus.ACTIVE or version_id is None:
                raise WorkflowNotActive(
                    f"workflow {workflow_id} is {status}; only an active (published) workflow takes new runs"
                )
            version = load_version(version_id)
            origin = current_origin()
            refusal = chain_refusal(origin, workflow_id=workflow_id, max_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH)
            refusal = refusal or _enrollment_refusal(store, workflow_id, contact_id, version.definition.reenrollment)
            if refusal:
                raise EnrollmentRefused(refusal)
            in_progress = store.counted_runs(workflow_account)
            if in_progress >= limit:
                raise ConcurrentExecutionLimitError(limit, in_progress)
            execution = self._create_run(
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

    def start_many(
        self,
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
            if status != WorkflowStatus.ACTIVE or version_id is None:
                raise WorkflowNotActive(
                    f"workflow {workflow_id} is {status}; only an active (published) workflow takes new runs"
                )
            version = load_version(version_id)
            origin = current_origin()
            refusal = chain_refusal(origin, workflow_id=workflow_id, max_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH)
            if refusal:
                raise EnrollmentRefused(refusal)
            rule = version.definition.reenrollment
            enrolled = store.enrollments(workflow_id, ids) if rule is not Reenrollment.ALWAYS else {}
            eligible: list[int] = []
            skipped: list[tuple[int, str]] = []
            for contact_id in ids:
                reason = None
                if contact_id in enrolled:
                    reason = enrollment_refusal(rule, has_unfinished_run=enrolled[contact_id], has_any_run=True)
                if reason:
                    skipped.append((contact_id, reason))
                else:
                    eligible.append(contact_id)
            in_progress = store.counted_runs(workflow_account)
            if in_progress + len(eligible) > limit:
                raise ConcurrentExecutionLimitError(limit, in_progress)
            rows, extras, specs = [], [], []
            for contact_id in eligible:
                run, _ = Execution.start(step_count=len(version.definition.steps), trigger_data=data)
                row = _new_row(run, account_id=workflow_account, version=version, contact_id=contact_id, origin=origin)
                rows.append(row)
                extras.append(
                    _extra(idempotency_key=None, source=source, event="", origin=origin, started_by_id=started_by_id)
                )
                specs.append(
                    JobSpec(
                        STEP_HANDLER,
                        _step_payload(row, 0),
                        queue=settings.WORKFLOW_QUEUE,
                        account=workflow_account,
                    )
                )
            for row, job_id in zip(rows, enqueue_many(specs), strict=True):
                row.next_job_id = job_id
            store.insert_runs(rows, extras)
        return BulkStarted([row.id for row in rows], skipped)

    def record_event(
        self,
        *,
        account: Account | int,
        contact: Contact | int,
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
            matches = store.event_candidates(account_id, name, tag if name in TAG_EVENTS else None)
            if not matches:
                return EventOutcome([], [])
            facts = store.contact(contact_id, account_id)
            if facts is None:
                raise ContactNotFound(contact_id)
            origin = current_origin()
            limit: int | None = None
            in_progress = 0
            started: list[WorkflowExecution] = []
            skipped: list[SkippedEnrollment] = []
            states: dict[int, tuple[str, UUID | None]] = {}
            for workflow_id, version_id in matches:
                # Each candidate on its own: a workflow that cannot be considered (a version that does not
                # load, a bug) is skipped and logged, never raised into the contact change that emitted the
                # event (it runs without a savepoint, so an exception would doom the caller's transaction).
                # A database error is different: the transaction is already doomed, so it propagates.
                try:
                    version = load_version(version_id)
                    unfit = _trigger_refusal(version, name, payload, facts)
                    if unfit is None:
                        if limit is None:  # lock the account once, before the first enrollment check
                            limit = store.lock_account(account_id)
                            in_progress = store.counted_runs(account_id)
                            # The candidates may come from a worker's cache: read what they are now, under the
                            # account lock (and, on PostgreSQL, a share lock: a pause commits before or after us).
                            states = store.workflow_states([wid for wid, _ in matches])
                        status, current_version_id = states.get(workflow_id, ("", None))
                        if status != WorkflowStatus.ACTIVE or current_version_id is None:
                            log.info(
                                "event %s: workflow %s is %s now; not started", name, workflow_id, status or "gone"
                            )
                            trigger_cache.forget(str(account_id))
                            continue
                        if current_version_id != version_id:  # published again since the candidates were read
                            trigger_cache.forget(str(account_id))
                            version = load_version(current_version_id)
                            unfit = _trigger_refusal(version, name, payload, facts)
                    if unfit is not None:
                        if unfit:
                            skipped.append(SkippedEnrollment(workflow_id, unfit))
                        continue
                    refusal = chain_refusal(
                        origin, workflow_id=workflow_id, max_depth=settings.WORKFLOW_MAX_CHAIN_DEPTH
                    )
                    refusal = refusal or _enrollment_refusal(
                        store, workflow_id, contact_id, version.definition.reenrollment
                    )
                    if refusal is None and in_progress >= limit:
                        refusal = str(ConcurrentExecutionLimitError(limit, in_progress))
                    if refusal:
                        log.warning(
                            "event %s for contact %s did not start workflow %s: %s",
                            name,
                            contact_id,
                            workflow_id,
                            refusal,
                        )
                        skipped.append(SkippedEnrollment(workflow_id, refusal))
                        continue
                    started.append(
                        self._create_run(
                            store,
                            account_id=account_id,
                            version=version,
                            contact_id=contact_id,
                            trigger_data=payload,
                            event=name,
                            source=TriggerSource.EVENT,
                            idempotency_key=None,
                            origin=origin,
                            started_by_id=None,
                        )
                    )
                    in_progress += 1
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
                    skipped.append(SkippedEnrollment(workflow_id, "the workflow could not be started (see the logs)"))
        return EventOutcome(started, skipped)

    def contact_deleted(self, *, contact_id: int) -> int:
        """The contact is being deleted (its runs and logs go with it): cancel the jobs its runs had queued.

        Called inside the deleting transaction; returns how many jobs were cancelled. A step in flight
        finds its run gone and does nothing.
        """
        job_ids = RunStore().next_jobs_of_contact(contact_id)
        return cancel_pending_jobs(ids=job_ids) if job_ids else 0

    def _create_run(
        self,
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
        run, move = Execution.start(step_count=len(version.definition.steps), trigger_data=trigger_data, event=event)
        row = _new_row(run, account_id=account_id, version=version, contact_id=contact_id, origin=origin)
        self._enact(row, run, move)
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

    # --- the worker's side: the `workflow_step` and `workflow_resume` jobs ----------------------
    def run_step(
        self, *, execution_id: UUID | str, step_index: int, job: JobContext, version_id: UUID | str | None = None
    ) -> None:
        """Carry out the run's current step (one attempt); see the module docstring for the transactions."""
        now = self.clock()
        store = RunStore()
        execution_id = _as_uuid(execution_id)
        if version_id is not None and _is_external(version_id, step_index):
            # Fast path for an external action: read without a lock, then mark the run ACTIVE by
            # compare-and-set on what was read (one statement, committed before the outside world is
            # touched). Anything unusual (paused, cancelled, raced, stale) takes the locked path below.
            found = store.read_run_with_contact(execution_id)
            if found is None or not _holds(found[0], job, step_index):
                return  # a stale or duplicate job (or the run was erased): nothing to do
            row, contact = found
            run = row.to_domain()
            if run.step_job_arrived() is StepGate.RUN:
                read_status, attempt_number = row.status, run.attempt_number
                run.begin_step(now)
                if store.compare_and_set(row, row.apply(run), expected_status=read_status, job_id=job.id):
                    version = load_version(row.version_id)
                    step = version.definition.steps[row.current_step_index]
                    self._carry_out_external(store, row, contact, version, step, attempt_number, now, job)
                    return
        with transaction.atomic():
            found = store.lock_run_with_contact(execution_id)
            if found is None or not _holds(found[0], job, step_index):
                return
            row, contact = found
            run = row.to_domain()
            gate = run.step_job_arrived()
            if gate is StepGate.IGNORE:
                return
            if gate is StepGate.RELEASE:
                run.release_step()
                row.next_job_id = None
                store.update_run(row, [*row.apply(run), "next_job_id"])
                job.mark_completed()
                return
            version = load_version(row.version_id)
            step = version.definition.steps[row.current_step_index]
            executor = executor_for(step.action_type)
            attempt_number = run.attempt_number
            run.begin_step(now)
            if not executor.external:
                # Internal actions change only Relay's tables: inside this transaction, exactly once.
                attempt = self._attempt(executor, self._step_run(row, contact, version, step, now), row, version)
                self._record(store, row, run, step, attempt_number, attempt, now, job)
                return
            store.update_run(row, row.apply(run))  # ACTIVE is committed before the outside world is touched
        self._carry_out_external(store, row, contact, version, step, attempt_number, now, job)

    def run_steps(self, items: Sequence[BatchItem]) -> list[BatchItem]:
        """Steps of several runs, each the same attempt as `run_step`, with the bookkeeping shared: the
        `workflow_step` batch handler. Returns the jobs left to `run_step` one by one.

        Internal steps: one transaction locks the runs (one statement) and their contacts (one), runs
        each action, completes the jobs and queues what follows (one), records the runs and their log
        rows (one). External steps: one compare-and-set marks the runs ACTIVE, the actions run one after
        the other outside any transaction, then one transaction records them all. Left one by one:
        anything but a plain step to run (a stale job, a paused or cancelled run), a second run of the
        same contact (its step must see the first one's change), and, if an internal action fails,
        every internal job of the batch: that rolls back, and the one-by-one path records the failure,
        so a batch never records anything `run_step` would not.
        """
        internal: list[tuple[UUID, int, BatchItem]] = []
        external: list[tuple[UUID, int, BatchItem]] = []
        left: list[BatchItem] = []
        for item in items:
            payload = item[0]
            try:
                execution_id, step_index = _as_uuid(payload["execution_id"]), int(payload["step_index"])
                executor = _executor_at(payload["version_id"], step_index) if payload.get("version_id") else None
            except (KeyError, TypeError, ValueError, ExecutionNotFound):
                executor = None
            if executor is None:
                left.append(item)
            else:
                (external if executor.external else internal).append((execution_id, step_index, item))
        store = RunStore()
        if len(internal) > 1:
            left += self._run_internal_steps(store, internal)
        else:
            left += [item for *_ids, item in internal]
        if len(external) > 1:
            left += self._run_external_steps(store, external)
        else:
            left += [item for *_ids, item in external]
        return left

    def _runnable(
        self, found: Mapping[UUID, tuple[RunRow, dict[str, Any]]], candidates: list[tuple[UUID, int, BatchItem]]
    ) -> tuple[list[tuple[RunRow, dict[str, Any], Execution, BatchItem]], list[BatchItem]]:
        """The candidates a batch may carry out (held, to run, one per contact), and the rest."""
        runnable, left = [], []
        contacts_seen: set[int] = set()
        for execution_id, step_index, item in candidates:
            row, contact = found.get(execution_id, (None, None))
            if row is None or not _holds(row, item[1], step_index) or row.contact_id in contacts_seen:
                left.append(item)
                continue
            run = row.to_domain()
            if run.step_job_arrived() is not StepGate.RUN:
                left.append(item)
                continue
            contacts_seen.add(row.contact_id)
            runnable.append((row, contact, run, item))
        return runnable, left

    def _run_internal_steps(self, store: RunStore, candidates: list[tuple[UUID, int, BatchItem]]) -> list[BatchItem]:
        now = self.clock()
        try:
            with transaction.atomic():
                found, contact_rows = store.lock_runs_with_contacts(
                    [execution_id for execution_id, _index, _item in candidates]
                )
                runnable, left = self._runnable(found, candidates)
                # By account, then contact: an action's event may lock its contact's account (to start runs),
                # so every batch takes accounts in the same order and no two batches deadlock on them.
                runnable.sort(key=lambda entry: (entry[0].account_id, entry[0].contact_id))
                settled = []
                for row, contact, run, item in runnable:
                    version = load_version(row.version_id)
                    step = version.definition.steps[row.current_step_index]
                    attempt_number = run.attempt_number
                    run.begin_step(now)
                    step_run = self._step_run(row, contact, version, step, now)
                    step_run.locked_contact_row = contact_rows[row.contact_id]
                    attempt = self._attempt(executor_for(step.action_type), step_run, row, version)
                    if attempt.error is not None:
                        raise _OneByOne
                    settled.append((row, run, step, attempt_number, attempt, item[1]))
                self._record_many(store, settled, now)
        except _OneByOne:
            return [item for *_ids, item in candidates]
        return left

    def _run_external_steps(self, store: RunStore, candidates: list[tuple[UUID, int, BatchItem]]) -> list[BatchItem]:
        now = self.clock()
        found = store.read_runs_with_contacts([execution_id for execution_id, _index, _item in candidates])
        runnable, left = self._runnable(found, candidates)
        marked = []
        for row, contact, run, item in runnable:
            read_status, attempt_number = row.status, run.attempt_number
            run.begin_step(now)
            row.apply(run)
            marked.append((row, contact, read_status, attempt_number, item))
        acquired = store.compare_and_set_many([(row, status, item[1].id) for row, _c, status, _n, item in marked])
        done = []
        # No new action starts past this: a batch of slow receivers must not hold its jobs (unrecorded, each
        # a possible duplicate if the worker is stopped) for long. What is left runs one by one.
        budget_ends = time.monotonic() + min(EXTERNAL_BATCH_SECONDS, settings.JOB_EXECUTION_TIMEOUT / 4)
        try:
            for row, contact, _status, attempt_number, item in marked:
                if row.id not in acquired or time.monotonic() > budget_ends:
                    left.append(item)  # raced (the locked path sorts it out), or no time left for this batch
                    continue
                version = load_version(row.version_id)
                step = version.definition.steps[row.current_step_index]
                attempt = self._attempt(
                    executor_for(step.action_type), self._step_run(row, contact, version, step, now), row, version
                )
                done.append((row, step, attempt_number, attempt, item[1]))
        except Exception:
            if done:  # what took effect is recorded before the error goes on (and its jobs run one by one)
                self._record_external_many(store, done, now)
            raise
        if not done:
            return left
        self._record_external_many(store, done, now)
        return left

    def _record_external_many(
        self, store: RunStore, done: list[tuple[RunRow, Step, int, _Attempt, JobContext]], now: datetime
    ) -> None:
        """One transaction records the batch's external actions; if that fails, each is recorded on its own."""
        try:
            with transaction.atomic():
                locked = store.lock_runs([row.id for row, *_rest in done])
                settled = []
                for row, step, attempt_number, attempt, job in done:
                    current = locked.get(row.id)
                    if current is None or not _holds(current, job, step.index):  # erased meanwhile
                        continue
                    settled.append((current, current.to_domain(), step, attempt_number, attempt, job))
                self._record_many(store, settled, now)
        except (OperationalError, InterfaceError):
            raise  # the database is away: the jobs are retried by the queue (their actions run again)
        except (DatabaseError, ValueError, LeaseLost) as exc:
            # One outcome the database refuses, or a job this worker no longer holds, must not cost the
            # others theirs: record each on its own, as run_step would have.
            log.warning("recording %d external steps together failed (%s); one by one", len(done), format_error(exc))
            for row, step, attempt_number, attempt, job in done:
                try:
                    self._record_external(store, row, step, attempt_number, attempt, now, job)
                except LeaseLost as lost:
                    log.warning("run %s step %s: %s; its outcome is discarded", row.id, step.index, lost)

    def _record_many(
        self, store: RunStore, settled: list[tuple[RunRow, Execution, Step, int, _Attempt, JobContext]], now: datetime
    ) -> None:
        """`_record` for several locked runs: their jobs complete and what follows is queued in one
        statement, then the runs and their log rows are written in one."""
        moves = []
        for row, run, step, attempt_number, attempt, _job in settled:
            move, log_values = self._settle(row, run, step, attempt_number, attempt, now)
            moves.append((row, run, move, log_values))
        next_ids = complete_all(
            [job for *_rest, job in settled], [self._next_job(row, run, move) for row, run, move, _log in moves]
        )
        entries = []
        for (row, run, move, log_values), next_id in zip(moves, next_ids, strict=True):
            _remember_next_job(row, move, next_id)
            entries.append((row, [*row.apply(run), "next_job_id"], log_values))
        store.record_steps(entries)

    def _carry_out_external(
        self,
        store: RunStore,
        row: RunRow,
        contact: dict[str, Any],
        version: LoadedVersion,
        step: Step,
        attempt_number: int,
        now: datetime,
        job: JobContext,
    ) -> None:
        """The action, outside any transaction; then one transaction records it and queues what follows."""
        attempt = self._attempt(
            executor_for(step.action_type), self._step_run(row, contact, version, step, now), row, version
        )
        self._record_external(store, row, step, attempt_number, attempt, now, job)

    def _record_external(
        self,
        store: RunStore,
        row: RunRow,
        step: Step,
        attempt_number: int,
        attempt: _Attempt,
        now: datetime,
        job: JobContext,
    ) -> None:
        """One transaction records an external action's attempt (or, if refused, that it could not be)."""
        try:
            with transaction.atomic():
                locked = store.lock_run(row.id)
                if locked is None or not _holds(locked, job, step.index):  # erased meanwhile (contact deleted)
                    return
                self._record(store, locked, locked.to_domain(), step, attempt_number, attempt, now, job)
        except (OperationalError, InterfaceError):
            raise  # the database is away, not refusing: the queue retries the job (the action runs again)
        except (DatabaseError, ValueError) as exc:
            # The database refused what we tried to record (or it could not be encoded). The action took
            # effect and cannot be undone; recording it again would be refused again. Record the step
            # FAILED without the refused data, so the run does not stay ACTIVE with a job that keeps dying.
            log.error(
                "run %s step %s: its outcome could not be stored (%s); the step is recorded failed without it",
                row.id,
                step.index,
                format_error(exc),
            )
            refused = _Attempt(
                None,
                OutcomeNotStored(
                    f"the step's outcome could not be stored ({type(exc).__name__}); the action may have taken effect"
                ),
                attempt.duration_ms,
            )
            with transaction.atomic():
                locked = store.lock_run(row.id)
                if locked is None or not _holds(locked, job, step.index):
                    return
                self._record(store, locked, locked.to_domain(), step, attempt_number, refused, now, job)

    def end_wait(self, *, execution_id: UUID | str, job: JobContext) -> None:
        """resume_at came: the run goes on with its next step (or completes, if the wait was the last)."""
        store = RunStore()
        with transaction.atomic():
            row = store.lock_run(_as_uuid(execution_id))
            if row is None or not _holds(row, job, None):
                return
            run = row.to_domain()
            move = run.wait_over(self.clock())
            if move is None:
                return
            self._enact(row, run, move, completing=job)
            store.update_run(row, [*row.apply(run), "next_job_id"])

    def job_died(self, *, execution_id: UUID | str, job_id: UUID, handler: str, status: str, error: str) -> bool:
        """The queue gave up on a job of this run (dead or failed): if it still held the run, the run fails.

        Called by the queue's dead-letter hook. A job that no longer held the run (stale, duplicate)
        changes nothing. True when the run was failed.
        """
        store = RunStore()
        with transaction.atomic():
            # Called on an executor or the maintenance thread: never stall them behind a long lock holder
            # (the hook's failure is logged; the run is then settled by an operator's retry).
            store.limit_lock_wait(JOB_DIED_LOCK_WAIT_SECONDS)
            try:
                row = store.lock_run(_as_uuid(execution_id))
            except ExecutionNotFound:
                return False
            if row is None or row.next_job_id != job_id:
                return False
            if not store.job_gave_up(job_id):  # an operator retried it meanwhile: it will move the run
                return False
            run = row.to_domain()
            message = truncate(f"StepJobDied: the {handler} job {job_id} ended {status}: {error}")
            if not run.job_lost(self.clock(), error=message, category="unknown"):
                return False
            row.next_job_id = None
            store.update_run(row, [*row.apply(run), "next_job_id"])
        log.error("run %s failed: %s", row.id, message)
        return True

    def reconcile_stranded(self, *, grace_seconds: float = 300.0, limit: int = 500) -> int:
        """Fail the runs whose job will never run (see RunStore.stranded_runs); returns how many.

        The sweep behind the dead-letter hook: it catches what the hook could not settle (the database away
        at that moment, a lock held too long), jobs an operator cancelled, and jobs purged since.
        """
        older_than = self.clock() - timedelta(seconds=grace_seconds)
        failed = 0
        for run_id, job_id, handler, status, error in RunStore().stranded_runs(older_than=older_than, limit=limit):
            try:
                failed += self.job_died(
                    execution_id=run_id,
                    job_id=job_id,
                    handler=handler or "workflow",
                    status="gone (purged)" if status == "missing" else status,
                    error=error or "no error was recorded",
                )
            except Exception as exc:  # one run's lock held too long must not stop the sweep for the others
                log.warning("run %s: could not be settled now (%s); the next sweep tries again", run_id, exc)
        return failed

    def _step_run(
        self, row: RunRow, contact: dict[str, Any], version: LoadedVersion, step: Step, now: datetime
    ) -> StepRun:
        return StepRun(
            execution_id=row.id,
            account_id=row.account_id,
            contact_id=row.contact_id,
            step=step,
            workflow_id=version.workflow_id,
            workflow_name=version.workflow_name,
            context=row.context,
            now=now,
            renderer=self.renderer,
            manual_retries=row.manual_retries,
            _contact=contact,
        )

    def _attempt(self, executor: ActionExecutor, step_run: StepRun, row: RunRow, version: LoadedVersion) -> _Attempt:
        origin = ChainOrigin(execution_id=row.id, workflow_id=version.workflow_id, depth=row.depth)
        started = time.monotonic()
        try:
            with caused_by(origin):
                # Internal actions make one call to a contacts service, whose own atomic block is the savepoint
                # that undoes a failed change; the run's transaction stays usable to record the failure.
                result = executor.execute(step_run)
            error = None
        except Exception as exc:  # classified by the RetryService; the stack trace goes to the debug log
            log.debug("run %s step %s raised", row.id, step_run.step.index, exc_info=exc)
            result, error = None, exc
        return _Attempt(result, error, int((time.monotonic() - started) * 1000))

    def _record(
        self,
        store: RunStore,
        row: RunRow,
        run: Execution,
        step: Step,
        attempt_number: int,
        attempt: _Attempt,
        started_at: datetime,
        job: JobContext,
    ) -> None:
        """One transaction: the log row, the run's move, the next job, and this job's completion."""
        move, log_values = self._settle(row, run, step, attempt_number, attempt, started_at)
        self._enact(row, run, move, completing=job)  # this job completes, what follows is queued: one statement
        store.record_step(row, [*row.apply(run), "next_job_id"], log_values)

    def _settle(
        self, row: RunRow, run: Execution, step: Step, attempt_number: int, attempt: _Attempt, started_at: datetime
    ) -> tuple[NextMove, dict[str, Any]]:
        """The run's move after this attempt (applied to `run`) and the attempt's log row."""
        now = self.clock()
        error_category = error_details = ""
        if attempt.error is None:
            result = attempt.result
            data = bounded_response(result.data)
            if result.wait_until is not None:
                move = run.begin_wait(now, result.wait_until, data)
            else:
                move = run.step_succeeded(now, data)
            outcome = StepOutcome.SKIPPED if result.skipped else StepOutcome.SUCCEEDED
        else:
            decision = self.retry_service.decide(
                error=attempt.error, attempt_number=attempt_number, overrides=step.retry
            )
            error_category, error_details = decision.error.category.value, decision.error.message
            move = run.step_failed(now, error=error_details, category=error_category, retry_delay=decision.delay)
            will_retry = decision.will_retry and run.status is not ExecutionStatus.CANCELLED
            outcome = StepOutcome.RETRYING if will_retry else StepOutcome.FAILED
            data = {
                **failure_details(attempt.error),  # what the other side answered, if it did (redacted)
                "reason": decision.reason if run.status is not ExecutionStatus.CANCELLED else "the run was cancelled",
            }
            if will_retry:
                data["retry_in_seconds"] = round(decision.delay, 3)
            data = bounded_response(data)
            log.log(
                logging.INFO if decision.will_retry else logging.WARNING,
                "run %s step %s (%s) attempt %s %s: %s (%s)",
                row.id,
                step.index,
                step.action_type,
                attempt_number,
                outcome,
                error_details,
                decision.reason,
            )
        return move, {
            "execution_id": row.id,
            "step_index": step.index,
            "step_name": step.label,
            "action_type": step.action_type.value,
            "attempt_number": attempt_number,
            "outcome": outcome.value,
            "started_at": started_at,
            "duration_ms": attempt.duration_ms,
            "error_category": error_category,
            "error_details": error_details,
            "response_data": data,
        }

    def _enact(self, row: RunRow, run: Execution, move: NextMove, completing: JobContext | None = None) -> None:
        """Put the run's next move on the queue, in the caller's transaction; remember its job.

        `completing`: the step's own job, marked completed by the same statement that queues what follows.
        """
        spec = self._next_job(row, run, move)
        if completing is not None:
            next_ids = completing.mark_completed(then=[spec] if spec else [])
        elif spec is not None:
            next_ids = [
                enqueue(spec.handler, spec.payload, queue=spec.queue, run_at=spec.run_at, account=spec.account).id
            ]
        else:
            next_ids = []
        _remember_next_job(row, move, next_ids[0] if spec is not None else None)

    def _next_job(self, row: RunRow, run: Execution, move: NextMove) -> JobSpec | None:
        """The job that carries out the run's next move, if it needs one."""
        spec = None
        if move.kind is MoveKind.RUN_STEP:
            spec = JobSpec(
                STEP_HANDLER,
                _step_payload(row, run.current_step_index),
                queue=settings.WORKFLOW_QUEUE,
                run_at=move.at,
                account=row.account_id,
            )
        elif move.kind is MoveKind.END_WAIT:
            spec = JobSpec(
                RESUME_HANDLER,
                {"execution_id": str(row.id)},
                queue=settings.WORKFLOW_QUEUE,
                run_at=move.at,
                account=row.account_id,
            )
        return spec

    # --- the operator's side ------------------------------------------------------------------
    def pause(self, *, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
        """Stop the run where it is: its queued job is cancelled; a step in flight still finishes and is logged."""

        def pause(row: RunRow, run: Execution) -> None:
            run.pause(self.clock())
            if run.paused_from is not ExecutionStatus.ACTIVE:
                _cancel_next_job(row)

        return self._operate(execution_id, account_id, pause)

    def resume(self, *, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
        """Carry on: a wait whose time passed during the pause continues at once, else waits the remainder."""
        return self._operate(execution_id, account_id, lambda row, run: self._enact(row, run, run.resume(self.clock())))

    def cancel(self, *, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
        """Stop the run for good; its queued job is cancelled and it never runs another step."""

        def cancel(row: RunRow, run: Execution) -> None:
            in_flight = run.status is ExecutionStatus.ACTIVE or run.paused_from is ExecutionStatus.ACTIVE
            run.cancel(self.clock())
            if not in_flight:  # a step in flight keeps its job, so its outcome is still logged
                _cancel_next_job(row)

        return self._operate(execution_id, account_id, cancel)

    def retry(self, *, execution_id: UUID | str, account_id: int | None = None) -> WorkflowExecution:
        """A FAILED run starts again from the step that failed, with fresh attempts."""
        return self._operate(execution_id, account_id, lambda row, run: self._enact(row, run, run.retry(self.clock())))

    def _operate(
        self, execution_id: UUID | str, account_id: int | None, change: Callable[[RunRow, Execution], None]
    ) -> WorkflowExecution:
        store = RunStore()
        pk = _as_uuid(execution_id)
        with transaction.atomic():
            row = store.lock_run(pk)
            if row is None or (account_id is not None and row.account_id != account_id):
                raise ExecutionNotFound(execution_id)
            run = row.to_domain()
            change(row, run)
            store.update_run(row, [*row.apply(run), "next_job_id"])
        return WorkflowExecution.objects.get(pk=pk)


# --- helpers -----------------------------------------------------------------------------------
def _trigger_refusal(version: LoadedVersion, name: str, payload: Any, facts: Any) -> str | None:
    """None when the version's trigger takes this event for this contact; "" when the event is not its
    own (nothing worth reporting); otherwise why the contact is left out."""
    trigger = version.definition.trigger
    if not trigger.matches_event(name, payload):
        return ""
    if not trigger.matches_contact(facts):
        return "the contact does not match the trigger's filter"
    return None


def _step_payload(row: RunRow, step_index: int) -> dict[str, Any]:
    # The version lets the job pick its path (external or internal action) before reading the run.
    return {"execution_id": str(row.id), "step_index": step_index, "version_id": str(row.version_id)}


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


def _enrollment_refusal(store: RunStore, workflow_id: int, contact_id: int, rule: Reenrollment) -> str | None:
    if rule is Reenrollment.ALWAYS:
        return None
    has_any, has_unfinished = store.enrollment(workflow_id, contact_id)
    return enrollment_refusal(rule, has_unfinished_run=has_unfinished, has_any_run=has_any)


def _as_uuid(execution_id: UUID | str) -> UUID:
    try:
        return execution_id if isinstance(execution_id, UUID) else UUID(str(execution_id))
    except ValueError:
        raise ExecutionNotFound(execution_id) from None


def _executor_at(version_id: UUID | str, step_index: int) -> ActionExecutor | None:
    """The executor of a version's step, from the cached version; None if there is no such step."""
    try:
        steps = load_version(_as_uuid(version_id)).definition.steps
    except (ExecutionNotFound, WorkflowVersion.DoesNotExist):
        return None
    return executor_for(steps[step_index].action_type) if 0 <= step_index < len(steps) else None


class _OneByOne(Exception):
    """A batch of steps gives up (an action failed): it rolls back, and each job runs on its own."""


def _is_external(version_id: UUID | str, step_index: int) -> bool:
    executor = _executor_at(version_id, step_index)
    return executor is not None and executor.external


def _holds(row: RunRow, job: JobContext, step_index: int | None) -> bool:
    """Is this job the one allowed to move the run (and at this step)? Else it is stale or a duplicate."""
    if row.next_job_id != job.id:
        return False
    return step_index is None or row.current_step_index == step_index


def _remember_next_job(row: RunRow, move: NextMove, job_id: UUID | None) -> None:
    """The run names the job that may move it next (none once it has nothing left to do)."""
    if job_id is not None:
        row.next_job_id = job_id
    elif move.kind is MoveKind.NOTHING:
        row.next_job_id = None


def _cancel_next_job(row: RunRow) -> None:
    if row.next_job_id is not None:
        cancel_pending_jobs(ids=[row.next_job_id])
        row.next_job_id = None
