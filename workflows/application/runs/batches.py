"""Steps claimed together (`run_steps`, the `workflow_step` batch handler): the same attempts, shared bookkeeping.

Each job is still one step, carried out, logged and scheduled as `run_step`
would; what is shared is the statements. Internal steps: one transaction
locks the runs (one statement) and their contacts (one), runs each action,
completes the jobs and queues what follows (one), records the runs and their
log rows (one). External steps: one compare-and-set marks the runs ACTIVE,
the actions run one after the other outside any transaction, then one
transaction records them all. `run_step` stays the reference: whatever a
batch cannot carry out exactly as it would goes back to it, one by one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction

from jobs.public.handlers import BatchItem, JobContext, complete_all
from kernel.failures import LeaseLost, format_error
from workflows.application.actions import executor_for
from workflows.application.definitions import load_version
from workflows.application.errors import ExecutionNotFound
from workflows.application.runs.goals import listening_read_once
from workflows.application.runs.moves import holds, next_job, remember_next_job, run_id
from workflows.application.runs.stepping import (
    Attempt,
    carry_out,
    executor_at,
    record_external,
    settle,
    step_run,
)
from workflows.domain.execution import Execution, StepGate
from workflows.domain.workflow import Step
from workflows.infrastructure.store import RunRow, RunStore

log = logging.getLogger("relay.workflows")

EXTERNAL_BATCH_SECONDS = 1.0  # a batch starts no external action after this long (see _run_external_steps)


class _OneByOne(Exception):
    """A batch of steps gives up (an action failed): it rolls back, and each job runs on its own."""


def run_steps(items: Sequence[BatchItem]) -> list[BatchItem]:
    """Steps of several runs, each the same attempt as `run_step`, with the bookkeeping shared: the
    `workflow_step` batch handler. Returns the jobs left to `run_step` one by one.

    Left one by one: anything but a plain step to run (a stale job, a paused or cancelled run), a
    second run of the same contact (its step must see the first one's change), and, if an internal
    action fails, every internal job of the batch: that rolls back, and the one-by-one path records
    the failure, so a batch never records anything `run_step` would not.
    """
    internal: list[tuple[UUID, int, BatchItem]] = []
    external: list[tuple[UUID, int, BatchItem]] = []
    left: list[BatchItem] = []
    for item in items:
        payload = item[0]
        try:
            execution_id, step_index = run_id(payload["execution_id"]), int(payload["step_index"])
            executor = executor_at(payload["version_id"], step_index) if payload.get("version_id") else None
            if executor is not None and load_version(run_id(payload["version_id"])).definition.goals:
                executor = None  # a goal may have been met before the step starts: run_step looks, one by one
        except (KeyError, TypeError, ValueError, ExecutionNotFound):
            executor = None
        if executor is None:
            left.append(item)
        else:
            (external if executor.external else internal).append((execution_id, step_index, item))
    store = RunStore()
    if len(internal) > 1:
        left += _run_internal_steps(store, internal)
    else:
        left += [item for *_ids, item in internal]
    if len(external) > 1:
        left += _run_external_steps(store, external)
    else:
        left += [item for *_ids, item in external]
    return left


def _runnable(
    found: Mapping[UUID, tuple[RunRow, dict[str, Any]]], candidates: list[tuple[UUID, int, BatchItem]]
) -> tuple[list[tuple[RunRow, dict[str, Any], Execution, BatchItem]], list[BatchItem]]:
    """The candidates a batch may carry out (held, to run, one per contact), and the rest."""
    runnable, left = [], []
    contacts_seen: set[int] = set()
    for execution_id, step_index, item in candidates:
        entry = found.get(execution_id)
        if entry is None or not holds(entry[0], item[1], step_index) or entry[0].contact_id in contacts_seen:
            left.append(item)
            continue
        row, contact = entry
        run = row.to_domain()
        if run.step_job_arrived() is not StepGate.RUN:
            left.append(item)
            continue
        contacts_seen.add(row.contact_id)
        runnable.append((row, contact, run, item))
    return runnable, left


def _run_internal_steps(store: RunStore, candidates: list[tuple[UUID, int, BatchItem]]) -> list[BatchItem]:
    try:
        with transaction.atomic(durable=True), listening_read_once():
            found, contact_rows = store.lock_runs_with_contacts(
                [execution_id for execution_id, _index, _item in candidates]
            )
            now = store.now()  # the database's, read with the runs
            runnable, left = _runnable(found, candidates)
            # By account, then contact: an action's event may lock its contact's account (to start runs),
            # so every batch takes accounts in the same order and no two batches deadlock on them.
            runnable.sort(key=lambda entry: (entry[0].account_id, entry[0].contact_id))
            settled = []
            for row, contact, run, item in runnable:
                version = load_version(row.version_id)
                step = version.definition.steps[row.current_step_index]
                attempt_number = run.attempt_number
                run.begin_step(now)
                prepared = step_run(row, contact, version, step, now)
                prepared.locked_contact_row = contact_rows[row.contact_id]
                attempt = carry_out(executor_for(step.action_type), prepared, row, version)
                if attempt.error is not None:
                    raise _OneByOne
                settled.append((row, run, step, attempt_number, attempt, item[1]))
            _record_many(store, settled, now, now)
    except _OneByOne:
        return [item for *_ids, item in candidates]
    return left


def _run_external_steps(store: RunStore, candidates: list[tuple[UUID, int, BatchItem]]) -> list[BatchItem]:
    found = store.read_runs_with_contacts([execution_id for execution_id, _index, _item in candidates])
    now = store.now()  # the database's, read with the runs
    runnable, left = _runnable(found, candidates)
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
            attempt = carry_out(
                executor_for(step.action_type), step_run(row, contact, version, step, now), row, version
            )
            done.append((row, step, attempt_number, attempt, item[1]))
    except Exception:
        if done:  # what took effect is recorded before the error goes on (and its jobs run one by one)
            _record_external_many(store, done, now)
        raise
    if not done:
        return left
    _record_external_many(store, done, now)
    return left


def _record_external_many(
    store: RunStore, done: list[tuple[RunRow, Step, int, Attempt, JobContext]], now: datetime
) -> None:
    """One transaction records the batch's external actions; if that fails, each is recorded on its own."""
    try:
        with transaction.atomic(durable=True):
            locked = store.lock_runs([row.id for row, *_rest in done])
            settled = []
            for row, step, attempt_number, attempt, job in done:
                current = locked.get(row.id)
                if current is None or not holds(current, job, step.index):  # erased meanwhile
                    continue
                settled.append((current, current.to_domain(), step, attempt_number, attempt, job))
            _record_many(store, settled, now, store.now())  # begun at `now`, recorded as of the lock
    except (OperationalError, InterfaceError):
        raise  # the database is away: the jobs are retried by the queue (their actions run again)
    except (DatabaseError, ValueError, LeaseLost) as exc:
        # One outcome the database refuses, or a job this worker no longer holds, must not cost the
        # others theirs: record each on its own, as run_step would have.
        log.warning("recording %d external steps together failed (%s); one by one", len(done), format_error(exc))
        for row, step, attempt_number, attempt, job in done:
            try:
                record_external(store, row, step, attempt_number, attempt, now, job)
            except LeaseLost as lost:
                log.warning("run %s step %s: %s; its outcome is discarded", row.id, step.index, lost)


def _record_many(
    store: RunStore,
    settled: list[tuple[RunRow, Execution, Step, int, Attempt, JobContext]],
    started_at: datetime,
    now: datetime,
) -> None:
    """`stepping.record` for several locked runs: their jobs complete and what follows is queued in one
    statement, then the runs and their log rows are written in one. Both times are the database's: when the
    steps began, and now (read with the runs' lock)."""
    moves = []
    for row, run, step, attempt_number, attempt, _job in settled:
        move, log_values = settle(row, run, step, attempt_number, attempt, started_at, now)
        moves.append((row, run, move, log_values))
    next_ids = complete_all(
        [job for *_rest, job in settled], [next_job(row, run, move) for row, run, move, _log in moves]
    )
    entries = []
    for (row, run, move, log_values), next_id in zip(moves, next_ids, strict=True):
        remember_next_job(row, move, next_id)
        entries.append((row, [*row.apply(run), "next_job_id"], log_values))
    store.record_steps(entries)
