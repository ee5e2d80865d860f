"""The statements a run's hot path runs, as plain SQL in one module (as the queue keeps its own).

Starting a run and carrying out a step happen thousands of times a second;
building ORM queries and model objects for each would cost more CPU than the
work itself. These functions read and write plain rows; `RunRow` maps a run
row to the domain entity and back. The ORM models stay the schema and serve
the admin, the API and the selectors.

The SQL is the same on PostgreSQL and SQLite except for row locks: SQLite
has a single writer (BEGIN IMMEDIATE), so row locks are left out there. On PostgreSQL
they are `FOR NO KEY UPDATE`: exclusive among writers of the row, yet they let other
transactions insert rows that point at it (a run's log rows and jobs, an account's
runs and contacts), which `FOR UPDATE` would block, inviting deadlocks.
Values are prepared by the model fields themselves (UUIDs, JSON, datetimes).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID

from django.db import connections
from django.db.models import Field, Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from contacts.infrastructure.store import COLUMNS as CONTACT_ROW
from contacts.infrastructure.store import row_from_db as contact_row_from_db
from jobs.public.operations import DEAD_LETTERS, JobStatus
from jobs.public.storage import held_in_outbox, is_split, now_of, queue_database, remember, transaction_now
from workflows.domain.execution import COUNTED_FOR_LIMIT, ENDED, UNFINISHED, Execution, ExecutionStatus
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

RUN_TABLE = WorkflowExecution._meta.db_table
# A run's job that will not move it again unless an operator retries it: the queue gave up on it, or it was
# cancelled. (A job that is gone, purged, counts too; the callers say so.)
JOB_GAVE_UP = tuple(sorted(DEAD_LETTERS | {JobStatus.CANCELLED}))
_GAVE_UP_SQL = ", ".join(f"'{status}'" for status in JOB_GAVE_UP)  # fixed names, for the statements' text
LOG_TABLE = ExecutionLog._meta.db_table
CONTACT_COLUMNS = (
    "id",
    "email",
    "phone",
    "first_name",
    "last_name",
    "time_zone",
    "tags",
    "custom_fields",
    "unsubscribed",
    "sms_opted_out",
)
_COUNTED = tuple(sorted(s.value for s in COUNTED_FOR_LIMIT))
_UNFINISHED = tuple(sorted(s.value for s in UNFINISHED))


def _uuid(value: Any) -> UUID | None:
    if value is None or isinstance(value, UUID):
        return value
    return UUID(str(value))


def _id(value: Any) -> UUID:
    """A UUID from a column that is never NULL."""
    return value if isinstance(value, UUID) else UUID(str(value))


def _field(model: type[Model], name: str) -> Field:
    """A concrete field by name (the stubs' get_field also allows reverse relations, which no name here is)."""
    return cast(Field, model._meta.get_field(name))


def _column(model: type[Model], name: str) -> str:
    """A concrete field's column name."""
    return cast(str, _field(model, name).column)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _contact(values: dict[str, Any]) -> dict[str, Any]:
    values["tags"] = _json(values["tags"]) or []
    values["custom_fields"] = _json(values["custom_fields"]) or {}
    values["unsubscribed"] = bool(values["unsubscribed"])
    values["sms_opted_out"] = bool(values["sms_opted_out"])
    return values


def _datetime(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value if value is None or timezone.is_aware(value) else timezone.make_aware(value, UTC)
    parsed = parse_datetime(str(value))  # SQLite stores text, in UTC
    return timezone.make_aware(parsed, UTC) if parsed and timezone.is_naive(parsed) else parsed


@dataclass(slots=True)
class RunRow:
    """The columns of a run the engine reads and writes on its hot path."""

    id: UUID
    account_id: int
    workflow_id: int
    version_id: UUID
    contact_id: int
    status: str
    current_step_index: int
    current_step_key: str
    end_reason: str
    step_count: int
    retry_count: int
    manual_retries: int
    context: dict[str, Any]
    resume_at: datetime | None
    paused_from: str
    last_error: str
    last_error_category: str
    next_job_id: UUID | None
    depth: int
    started_at: datetime | None
    completed_at: datetime | None

    @classmethod
    def from_db(cls, values: tuple) -> RunRow:
        row = cls(*values)
        row.id = _id(row.id)
        row.version_id = _id(row.version_id)
        row.next_job_id = _uuid(row.next_job_id)
        row.context = _json(row.context) or {}
        row.resume_at = _datetime(row.resume_at)
        row.started_at = _datetime(row.started_at)
        row.completed_at = _datetime(row.completed_at)
        return row

    def to_domain(self) -> Execution:
        return Execution(
            status=ExecutionStatus(self.status),
            step_count=self.step_count,
            current_step_index=self.current_step_index,
            current_step_key=self.current_step_key,
            end_reason=self.end_reason,
            retry_count=self.retry_count,
            manual_retries=self.manual_retries,
            resume_at=self.resume_at,
            paused_from=ExecutionStatus(self.paused_from) if self.paused_from else None,
            started_at=self.started_at,
            completed_at=self.completed_at,
            last_error=self.last_error,
            last_error_category=self.last_error_category,
            context=self.context,
        )

    def apply(self, run: Execution) -> list[str]:
        """Copy the entity's state onto the row; returns the columns that changed."""
        values = {
            "status": run.status.value,
            "current_step_index": run.current_step_index,
            "current_step_key": run.current_step_key,
            "end_reason": run.end_reason,
            "retry_count": run.retry_count,
            "manual_retries": run.manual_retries,
            "resume_at": run.resume_at,
            "paused_from": run.paused_from.value if run.paused_from else "",
            "started_at": run.started_at,
            "completed_at": run.completed_at,
            "last_error": run.last_error,
            "last_error_category": run.last_error_category,
        }
        changed = []
        for name, value in values.items():
            if getattr(self, name) != value:
                setattr(self, name, value)
                changed.append(name)
        if run.context_changed:
            self.context = run.context
            changed.append("context")
            run.context_changed = False
        return changed


RUN_COLUMNS = tuple(f.name for f in fields(RunRow))
# What a step may change on a run: record_steps writes them all (and updated_at).
_RUN_RECORDED = (
    "id",
    "status",
    "current_step_index",
    "current_step_key",
    "end_reason",
    "retry_count",
    "context",
    "resume_at",
    "paused_from",
    "started_at",
    "completed_at",
    "last_error",
    "last_error_category",
    "next_job_id",
)
# A log row is written whole: every column but its id (the keys of the log row runs.stepping.settle builds).
_LOG_RECORDED = tuple(f.attname for f in ExecutionLog._meta.concrete_fields if not f.primary_key)


def _run_and_contact(values: tuple) -> tuple[RunRow, dict[str, Any]]:
    """A row of `SELECT <run columns>, <contact columns>`: the run and its contact as templates see it."""
    run = RunRow.from_db(values[: len(RUN_COLUMNS)])
    return run, _contact(dict(zip(CONTACT_COLUMNS, values[len(RUN_COLUMNS) :], strict=True)))


def _plain(value: Any) -> Any:
    """JSON for what a run row holds beyond JSON's types: UUIDs and datetimes."""
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_record_steps_statement: str | None = None


def _record_steps_sql(connection) -> str:
    """One UPDATE of the runs and one INSERT of their log rows, each from a JSON document of rows."""
    global _record_steps_statement
    if _record_steps_statement is None:

        def recordset(model, names: tuple[str, ...]) -> str:
            fields_ = [_field(model, name) for name in names]
            return ", ".join(f"{f.column} {f.db_type(connection)}" for f in fields_)

        run_columns = [_column(WorkflowExecution, name) for name in _RUN_RECORDED[1:]]
        log_columns = ", ".join(_column(ExecutionLog, name) for name in _LOG_RECORDED)
        _record_steps_statement = (
            f"WITH runs AS (UPDATE {RUN_TABLE} e SET {', '.join(f'{c} = v.{c}' for c in run_columns)},"
            f" updated_at = statement_timestamp()"
            f" FROM jsonb_to_recordset(%s::jsonb) AS v({recordset(WorkflowExecution, _RUN_RECORDED)})"
            f" WHERE e.id = ANY(%s::uuid[]) AND e.id = v.id)"
            f" INSERT INTO {LOG_TABLE} ({log_columns}) SELECT {log_columns}"
            f" FROM jsonb_to_recordset(%s::jsonb) AS l({recordset(ExecutionLog, _LOG_RECORDED)})"
        )
    return _record_steps_statement


@dataclass(frozen=True)
class RunCounts:
    """A port: who counts the runs this store starts and ends (the engine's metrics, set from its ready()).

    The store says what it wrote once the writing transaction commits (a rolled-back step counts nothing):
    runs started per workflow id, runs ended per (workflow id, final status). It knows nothing of metrics.
    """

    started: Callable[[Counter[int]], None]
    finished: Callable[[Counter[tuple[int, str]]], None]


_run_counts: RunCounts | None = None


def count_runs_with(counts: RunCounts | None) -> None:
    global _run_counts
    _run_counts = counts


_RUN_SELECT = ", ".join(f"e.{_column(WorkflowExecution, c)}" for c in RUN_COLUMNS)


class RunStore:
    """The hot path's statements for one database alias (the calling thread's connection).

    Its reads of runs also read the database's now (`read_at`, a column of the same statement on
    PostgreSQL: no round trip more), the one `now` a use case passes to the domain for its unit of work;
    its writes stamp `updated_at` and `created_at` in the statement itself. So every time a run stores (its
    resume_at, a retry's due time, its started_at and completed_at, its log rows' started_at) is on the
    database's clock, never the worker host's (docs/decisions/database-clock.md).
    """

    def __init__(self, using: str = "default") -> None:
        self.using = using
        self.read_at: datetime | None = None  # the database's now at this store's last read of runs

    @property
    def connection(self):
        return connections[self.using]

    @property
    def _for_update(self) -> str:
        return " FOR NO KEY UPDATE" if self.connection.vendor == "postgresql" else ""

    def _rows(self, sql: str, params: Any) -> list[tuple]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            # Every caller's statement returns rows; psycopg builds `description` anew on each access.
            return cursor.fetchall()

    def _prep(self, model, name: str, value: Any) -> Any:
        return model._meta.get_field(name).get_db_prep_save(value, self.connection)

    # --- the database's clock ------------------------------------------------------------------
    @property
    def _on_postgres(self) -> bool:
        return self.connection.vendor == "postgresql"

    @property
    def _now_column(self) -> str:
        """Selected last by a read of runs: the database's now, with the rows (PostgreSQL)."""
        return ", statement_timestamp()" if self._on_postgres else ""

    def _stamped(self, rows: list[tuple]) -> list[tuple]:
        """The rows of a read that selected `_now_column`, without it; `read_at` is now that read's now."""
        if not self._on_postgres:
            self.read_at = now_of(self.connection)  # SQLite: one host, its clock is the database's
            return rows
        self.read_at = rows[0][-1] if rows else None
        if self.read_at is not None:  # what the rest of this transaction calls now (its contacts' events)
            remember(self.connection, self.read_at)
        return [row[:-1] for row in rows]

    def now(self) -> datetime:
        """The database's now for this unit of work: as of the last read of runs, or its transaction's."""
        if self.read_at is None:
            self.read_at = transaction_now(self.using)
        return self.read_at

    def _write_time(self) -> tuple[str, list[Any]]:
        """SQL and parameters for "now" in a write: the statement's own time on PostgreSQL; on SQLite this
        host's clock, which is the database's (through the same seam)."""
        if self._on_postgres:
            return "statement_timestamp()", []
        return "%s", [self._prep(WorkflowExecution, "updated_at", now_of(self.connection))]

    # --- what it wrote, for whoever counts runs (the RunCounts port), once the transaction commits ------
    def _count_started(self, rows: list[RunRow]) -> None:
        counts = _run_counts
        if counts is not None:
            started = Counter(row.workflow_id for row in rows)
            self.connection.on_commit(lambda: counts.started(started))

    def _count_finished(self, entries: list[tuple[RunRow, list[str]]]) -> None:
        counts = _run_counts
        if counts is None:
            return
        finished = Counter(
            (row.workflow_id, row.status) for row, columns in entries if "status" in columns and row.status in ENDED
        )
        if finished:
            self.connection.on_commit(lambda: counts.finished(finished))

    # --- runs -------------------------------------------------------------------------------
    def lock_run(self, execution_id: UUID) -> RunRow | None:
        """The run's row, locked until the transaction ends."""
        rows = self._stamped(
            self._rows(
                f"SELECT {_RUN_SELECT}{self._now_column} FROM {RUN_TABLE} e WHERE e.id = %s{self._for_update}",
                [self._prep(WorkflowExecution, "id", execution_id)],
            )
        )
        return RunRow.from_db(rows[0]) if rows else None

    def lock_run_with_contact(self, execution_id: UUID) -> tuple[RunRow, dict[str, Any]] | None:
        """The run's row (locked) and its contact as it is now (not locked), in one round trip."""
        return self._run_with_contact(execution_id, lock=True)

    def read_run_with_contact(self, execution_id: UUID) -> tuple[RunRow, dict[str, Any]] | None:
        """The same, without a lock: for an optimistic compare_and_set."""
        return self._run_with_contact(execution_id, lock=False)

    def _run_with_contact(self, execution_id: UUID, *, lock: bool) -> tuple[RunRow, dict[str, Any]] | None:
        contact_select = ", ".join(f"c.{name}" for name in CONTACT_COLUMNS)
        suffix = " FOR NO KEY UPDATE OF e" if lock and self._for_update else ""
        rows = self._stamped(
            self._rows(
                f"SELECT {_RUN_SELECT}, {contact_select}{self._now_column} FROM {RUN_TABLE} e"
                f" JOIN contacts_contact c ON c.id = e.contact_id WHERE e.id = %s{suffix}",
                [self._prep(WorkflowExecution, "id", execution_id)],
            )
        )
        if not rows:
            return None
        values = rows[0]
        return _run_and_contact(values)

    def lock_runs(self, execution_ids: list[UUID]) -> dict[UUID, RunRow]:
        """Several runs' rows, locked in id order."""
        return {run.id: run for run in self._runs(execution_ids, self._for_update)}

    def read_runs_with_contacts(self, execution_ids: list[UUID]) -> dict[UUID, tuple[RunRow, dict[str, Any]]]:
        """Several runs and their contacts, without locks: for an optimistic compare_and_set_many."""
        if not execution_ids:
            return {}
        ids = sorted({self._prep(WorkflowExecution, "id", i) for i in execution_ids}, key=str)
        contact_select = ", ".join(f"c.{name}" for name in CONTACT_COLUMNS)
        found = {}
        for values in self._stamped(
            self._rows(
                f"SELECT {_RUN_SELECT}, {contact_select}{self._now_column} FROM {RUN_TABLE} e"
                f" JOIN contacts_contact c ON c.id = e.contact_id WHERE e.id {self._any(ids)}",
                self._any_params(ids),
            )
        ):
            run, contact = _run_and_contact(values)
            found[run.id] = (run, contact)
        return found

    def compare_and_set_many(self, entries: list[tuple[RunRow, str, UUID]]) -> set[UUID]:
        """Mark several runs as their RunRow says (status, started_at) where each is still as it was read:
        (row, status read, the job holding it). Returns the ids that were set."""
        if not entries:
            return set()
        if self.connection.vendor != "postgresql":
            return {
                row.id
                for row, expected, job_id in entries
                if self.compare_and_set(row, ["status", "started_at"], expected_status=expected, job_id=job_id)
            }
        marks = json.dumps(
            [
                {
                    "id": str(row.id),
                    "status": row.status,
                    "started_at": row.started_at.isoformat() if row.started_at else None,
                    "expected": expected,
                    "step": row.current_step_index,
                    "job": str(job_id),
                }
                for row, expected, job_id in entries
            ]
        )
        rows = self._rows(
            f"UPDATE {RUN_TABLE} e SET status = v.status, started_at = v.started_at,"
            " updated_at = statement_timestamp() FROM jsonb_to_recordset(%s::jsonb)"
            " AS v(id uuid, status text, started_at timestamptz, expected text, step int, job uuid)"
            " WHERE e.id = ANY(%s::uuid[]) AND e.id = v.id AND e.status = v.expected"
            " AND e.current_step_index = v.step AND e.next_job_id = v.job RETURNING e.id",
            [marks, [row.id for row, _expected, _job in entries]],
        )
        return {_id(row[0]) for row in rows}

    def _runs(self, execution_ids: list[UUID], suffix: str) -> list[RunRow]:
        if not execution_ids:
            return []
        ids = sorted({self._prep(WorkflowExecution, "id", i) for i in execution_ids}, key=str)
        return [
            RunRow.from_db(values)
            for values in self._stamped(
                self._rows(
                    f"SELECT {_RUN_SELECT}{self._now_column} FROM {RUN_TABLE} e WHERE e.id {self._any(ids)}"
                    f" ORDER BY e.id{suffix}",
                    self._any_params(ids),
                )
            )
        ]

    def lock_runs_with_contacts(
        self, execution_ids: list[UUID]
    ) -> tuple[dict[UUID, tuple[RunRow, dict[str, Any]]], dict[int, dict[str, Any]]]:
        """Several runs and their contacts, all locked: the runs in id order, then the contacts in id order.

        Returns each run with its contact as templates see it, and each contact's whole row (by id) for the
        contacts services, which need not read it again. Every batch locks in this order (runs before
        contacts, each by id, all before any account), so batches cannot deadlock one another nor the
        one-run paths (docs/decisions/lock-order.md).
        """
        runs = self._runs(execution_ids, self._for_update)
        contact_ids = sorted({run.contact_id for run in runs})
        rows: dict[int, dict[str, Any]] = {}
        if contact_ids:
            for values in self._rows(
                f"SELECT {', '.join('c.' + name for name in CONTACT_ROW)} FROM contacts_contact c"
                f" WHERE c.id {self._any(contact_ids)} ORDER BY c.id{self._for_update}",
                self._any_params(contact_ids),
            ):
                row = contact_row_from_db(values)
                rows[row["id"]] = row
        found = {
            run.id: (run, _contact({name: rows[run.contact_id][name] for name in CONTACT_COLUMNS}))
            for run in runs
            if run.contact_id in rows
        }
        return found, rows

    def _any(self, values: list[Any]) -> str:
        """`= ANY(array)` on PostgreSQL (one prepared statement whatever the count); `IN (...)` on SQLite."""
        if self.connection.vendor == "postgresql":
            return "= ANY(%s)"
        return f"IN ({', '.join(['%s'] * len(values))})"

    def _any_params(self, values: list[Any]) -> list[Any]:
        return [list(values)] if self.connection.vendor == "postgresql" else list(values)

    def record_steps(self, entries: list[tuple[RunRow, list[str], dict[str, Any]]]) -> None:
        """`record_step` for several locked runs: one statement on PostgreSQL. Every run's row is written
        whole from its RunRow (which holds what is stored), so one statement fits runs that moved
        differently; rows travel as JSON documents, so the statement is the same for any number of them."""
        if not entries:
            return
        if self.connection.vendor != "postgresql" or len(entries) == 1:
            for row, columns, log in entries:
                self.record_step(row, columns, log)
            return
        runs = json.dumps(
            [{name: getattr(row, name) for name in _RUN_RECORDED} for row, _c, _l in entries], default=_plain
        )
        logs = json.dumps([log for _r, _c, log in entries], default=_plain)
        self._count_finished([(row, columns) for row, columns, _l in entries])
        with self.connection.cursor() as cursor:
            # The ids again as an array: a JSON document's rows are opaque to the planner, which would
            # otherwise scan every run rather than look these up by primary key.
            ids = [row.id for row, _c, _l in entries]
            cursor.execute(_record_steps_sql(self.connection), [runs, ids, logs])

    def compare_and_set(self, row: RunRow, columns: list[str], *, expected_status: str, job_id: UUID) -> bool:
        """Write `columns` only if the run is still as it was read (status, step, the job holding it)."""
        assignments, params = self._assignments(row, columns)
        params += [
            self._prep(WorkflowExecution, "id", row.id),
            expected_status,
            row.current_step_index,
            self._prep(WorkflowExecution, "next_job_id", job_id),
        ]
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {RUN_TABLE} SET {assignments}"
                " WHERE id = %s AND status = %s AND current_step_index = %s AND next_job_id = %s",
                params,
            )
            if cursor.rowcount != 1:
                return False
        self._count_finished([(row, columns)])
        return True

    def record_step(self, row: RunRow, columns: list[str], log: dict[str, Any]) -> None:
        """Save the run's move and insert the attempt's log row (one statement on PostgreSQL). Hold the lock."""
        if self.connection.vendor != "postgresql":
            self.update_run(row, columns)
            self.insert_log(**log)
            return
        self._count_finished([(row, columns)])
        assignments, params = self._assignments(row, columns)
        params.append(self._prep(WorkflowExecution, "id", row.id))
        log_columns = [_column(ExecutionLog, name) for name in log]
        params += [self._prep(ExecutionLog, name, value) for name, value in log.items()]
        with self.connection.cursor() as cursor:
            # The caller holds the run's row lock, so the update always applies; VALUES gives every
            # parameter its column's type (with server-side binding too).
            cursor.execute(
                f"WITH run AS (UPDATE {RUN_TABLE} SET {assignments} WHERE id = %s)"
                f" INSERT INTO {LOG_TABLE} ({', '.join(log_columns)}) VALUES ({', '.join(['%s'] * len(log_columns))})",
                params,
            )

    def _assignments(self, row: RunRow, columns: list[str]) -> tuple[str, list[Any]]:
        params = [self._prep(WorkflowExecution, name, getattr(row, name)) for name in columns]
        now_sql, now_params = self._write_time()
        assignments = [f"{_column(WorkflowExecution, n)} = %s" for n in columns]
        assignments.append(f"{_column(WorkflowExecution, 'updated_at')} = {now_sql}")
        return ", ".join(assignments), params + now_params

    def update_run(self, row: RunRow, columns: list[str]) -> None:
        self._count_finished([(row, columns)])
        assignments, params = self._assignments(row, columns)
        params.append(self._prep(WorkflowExecution, "id", row.id))
        with self.connection.cursor() as cursor:
            cursor.execute(f"UPDATE {RUN_TABLE} SET {assignments} WHERE id = %s", params)

    def insert_run(self, row: RunRow, **extra: Any) -> datetime:
        """Insert a new run; `extra` holds the columns RunRow does not carry. Returns created_at (the
        database's now: the statement's own on PostgreSQL)."""
        return self.insert_runs([row], [extra])

    def insert_runs(self, rows: list[RunRow], extras: list[dict[str, Any]], chunk: int = 500) -> datetime:
        """Insert many new runs in few statements; returns their created_at: the database's now, stamped by
        each statement itself on PostgreSQL (this host's clock on SQLite, which is the database's)."""
        if not rows:
            return self.now()
        names = [*RUN_COLUMNS, *extras[0]]
        columns = ", ".join(_column(WorkflowExecution, name) for name in [*names, "created_at", "updated_at"])
        fields_ = [_field(WorkflowExecution, name) for name in names]
        created = None if self._on_postgres else now_of(self.connection)
        stamp, stamps = "statement_timestamp()", []
        if created is not None:
            stamp, stamps = "%s", [self._prep(WorkflowExecution, "created_at", created)] * 2
        placeholder = "(" + ", ".join(["%s"] * len(names) + [stamp, stamp]) + ")"
        for start in range(0, len(rows), chunk):
            params: list[Any] = []
            part = list(zip(rows[start : start + chunk], extras[start : start + chunk], strict=True))
            for row, extra in part:
                values = [*(getattr(row, n) for n in RUN_COLUMNS), *extra.values()]
                params += [f.get_db_prep_save(v, self.connection) for f, v in zip(fields_, values, strict=True)]
                params += stamps
            returning = " RETURNING created_at" if created is None else ""
            with self.connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {RUN_TABLE} ({columns}) VALUES {', '.join([placeholder] * len(part))}{returning}",
                    params,
                )
                if returning:
                    created = cursor.fetchone()[0]
        self._count_started(rows)
        assert created is not None
        return created

    def insert_log(self, **values: Any) -> None:
        columns = [_column(ExecutionLog, name) for name in values]
        params = [self._prep(ExecutionLog, name, value) for name, value in values.items()]
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {LOG_TABLE} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                params,
            )

    # --- starting runs ------------------------------------------------------------------------
    def workflow(self, workflow_id: int, account_id: int | None) -> tuple[int, int, str, UUID | None] | None:
        """(id, account_id, status, current_version_id) of a workflow, within an account when given."""
        sql = "SELECT id, account_id, status, current_version_id FROM workflows_workflow WHERE id = %s"
        params: list[Any] = [workflow_id]
        if account_id is not None:
            sql += " AND account_id = %s"
            params.append(account_id)
        rows = self._rows(sql, params)
        if not rows:
            return None
        wid, aid, status, version_id = rows[0]
        return wid, aid, status, _uuid(version_id)

    def lock_for_start(
        self, workflow_id: int, account_id: int | None, contact_id: int
    ) -> tuple[int, int, str, UUID | None, bool] | None:
        """One round trip for a start: lock the workflow's account, read the workflow, check the contact.

        Returns (account id, max_concurrent_executions, workflow status, current version id, contact is in
        the account), or None for no such workflow (within `account_id` when given). Anything counted under
        the lock (runs in progress) must be read by a later statement, which sees what committed before it.
        """
        lock = " FOR NO KEY UPDATE OF a" if self._for_update else ""
        sql = (
            "SELECT a.id, a.max_concurrent_executions, w.status, w.current_version_id,"
            " EXISTS(SELECT 1 FROM contacts_contact c WHERE c.id = %s AND c.account_id = w.account_id)"
            " FROM workflows_workflow w JOIN accounts_account a ON a.id = w.account_id WHERE w.id = %s"
        )
        params: list[Any] = [contact_id, workflow_id]
        if account_id is not None:
            sql += " AND w.account_id = %s"
            params.append(account_id)
        rows = self._rows(sql + lock, params)
        if not rows:
            return None
        aid, limit, status, version_id, contact_ok = rows[0]
        return aid, limit, status, _uuid(version_id), bool(contact_ok)

    def contact(self, contact_id: int, account_id: int) -> dict[str, Any] | None:
        rows = self._rows(
            f"SELECT {', '.join(CONTACT_COLUMNS)} FROM contacts_contact WHERE id = %s AND account_id = %s",
            [contact_id, account_id],
        )
        return _contact(dict(zip(CONTACT_COLUMNS, rows[0], strict=True))) if rows else None

    def contacts_in_account(self, contact_ids: list[int], account_id: int) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(contact_ids), 1000):
            part = contact_ids[start : start + 1000]
            rows = self._rows(
                f"SELECT id FROM contacts_contact WHERE account_id = %s AND id IN ({', '.join(['%s'] * len(part))})",
                [account_id, *part],
            )
            found.update(contact_id for (contact_id,) in rows)
        return found

    def enrollments(self, workflow_id: int, contact_ids: list[int]) -> dict[int, bool]:
        """For the contacts that have runs of this workflow: whether one of them is unfinished."""
        placeholders = ", ".join(["%s"] * len(_UNFINISHED))
        result: dict[int, bool] = {}
        for start in range(0, len(contact_ids), 1000):
            part = contact_ids[start : start + 1000]
            rows = self._rows(
                f"SELECT contact_id, max(CASE WHEN status IN ({placeholders}) THEN 1 ELSE 0 END) FROM {RUN_TABLE}"
                f" WHERE workflow_id = %s AND contact_id IN ({', '.join(['%s'] * len(part))}) GROUP BY contact_id",
                [*_UNFINISHED, workflow_id, *part],
            )
            result.update((contact_id, bool(unfinished)) for contact_id, unfinished in rows)
        return result

    def workflow_states(self, workflow_ids: list[int]) -> dict[int, tuple[str, UUID | None]]:
        """{id: (status, current_version_id)} of these workflows as committed now.

        On PostgreSQL the rows are share-locked: a status move (which locks the row for update) commits
        either before this read or after the caller's transaction, never in between.
        """
        placeholders = ", ".join(["%s"] * len(workflow_ids))
        lock = " FOR SHARE" if self._for_update else ""
        rows = self._rows(
            f"SELECT id, status, current_version_id FROM workflows_workflow WHERE id IN ({placeholders}){lock}",
            list(workflow_ids),
        )
        return {wid: (status, _uuid(version_id)) for wid, status, version_id in rows}

    def limit_lock_wait(self, seconds: float) -> None:
        """For the rest of this transaction, waiting for a row lock longer than `seconds` is an error
        (PostgreSQL; SQLite has one writer at a time and its own busy timeout)."""
        if self.connection.vendor == "postgresql":
            with self.connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{int(seconds * 1000)}ms'")

    def lock_account(self, account_id: int) -> int:
        """Lock the account row (starts for one account are serialized); returns max_concurrent_executions."""
        rows = self._rows(
            f"SELECT max_concurrent_executions FROM accounts_account WHERE id = %s{self._for_update}", [account_id]
        )
        return rows[0][0]

    def counted_runs(self, account_id: int) -> int:
        """Runs QUEUED or ACTIVE: what max_concurrent_executions limits."""
        placeholders = ", ".join(["%s"] * len(_COUNTED))
        return self._rows(
            f"SELECT count(*) FROM {RUN_TABLE} WHERE account_id = %s AND status IN ({placeholders})",
            [account_id, *_COUNTED],
        )[0][0]

    def enrollment(self, workflow_id: int, contact_id: int) -> tuple[bool, bool]:
        """(has any run, has an unfinished run) of this workflow for this contact."""
        placeholders = ", ".join(["%s"] * len(_UNFINISHED))
        rows = self._rows(
            f"SELECT status IN ({placeholders}) FROM {RUN_TABLE} WHERE workflow_id = %s AND contact_id = %s"
            f" ORDER BY status IN ({placeholders}) DESC LIMIT 1",
            [*_UNFINISHED, workflow_id, contact_id, *_UNFINISHED],
        )
        if not rows:
            return False, False
        return True, bool(rows[0][0])

    def run_by_idempotency_key(self, account_id: int, key: str) -> tuple[UUID, int, int] | None:
        """(id, workflow_id, contact_id) of the account's run holding `key`."""
        rows = self._rows(
            f"SELECT id, workflow_id, contact_id FROM {RUN_TABLE} WHERE account_id = %s AND idempotency_key = %s",
            [account_id, key],
        )
        return (_id(rows[0][0]), rows[0][1], rows[0][2]) if rows else None

    def stranded_runs(self, *, older_than: datetime, limit: int) -> list[tuple[UUID, UUID, str, str, str]]:
        """Runs held by a job that will never run: (run id, job id, handler, job status, job error).

        A run QUEUED, ACTIVE or WAITING is held by its next job; when that job ended dead, failed or
        cancelled (an operator's cancel), or is gone (purged), nothing will ever move the run. Read from
        the runs in flight (the partial index `execution_in_flight`: the ended runs, however many, are not
        in it) joined to their job. Only runs unchanged since `older_than`: a move being committed right
        now is never second-guessed.
        """
        if is_split():
            return self._stranded_runs_apart(older_than=older_than, limit=limit)
        rows = self._rows(
            "SELECT e.id, e.next_job_id, coalesce(j.handler, ''), coalesce(j.status, 'missing'),"
            " coalesce(j.error_message, '')"
            f" FROM {RUN_TABLE} e LEFT JOIN jobs_job j ON j.id = e.next_job_id"
            " WHERE e.status IN ('active', 'queued', 'waiting') AND e.next_job_id IS NOT NULL"
            f" AND e.updated_at < %s AND (j.id IS NULL OR j.status IN ({_GAVE_UP_SQL}))"
            " LIMIT %s",
            [self._prep(WorkflowExecution, "updated_at", older_than), limit],
        )
        return [(_id(run_id), _id(job_id), handler, status, error) for run_id, job_id, handler, status, error in rows]

    def _stranded_runs_apart(self, *, older_than: datetime, limit: int) -> list[tuple[UUID, UUID, str, str, str]]:
        """stranded_runs with the queue in its own database: the runs in flight, a page at a time, then their
        jobs read from the queue's database by id; a job still in this database's outbox (committed, not
        moved yet) is not missing."""
        found: list[tuple[UUID, UUID, str, str, str]] = []
        after: Any = None
        queue = connections[queue_database()]
        while len(found) < limit:
            runs = self._rows(
                f"SELECT e.id, e.next_job_id FROM {RUN_TABLE} e"
                " WHERE e.status IN ('active', 'queued', 'waiting') AND e.next_job_id IS NOT NULL"
                " AND e.updated_at < %s"
                + (" AND e.id > %s" if after is not None else "")
                + " ORDER BY e.id LIMIT 1000",
                [self._prep(WorkflowExecution, "updated_at", older_than), *([after] if after is not None else [])],
            )
            if not runs:
                break
            after = runs[-1][0]
            job_ids = [_id(job_id) for _run, job_id in runs]
            with queue.cursor() as cursor:
                cursor.execute(
                    "SELECT id, handler, status, error_message FROM jobs_job WHERE id = ANY(%s::uuid[])", [job_ids]
                )
                jobs = {_id(i): (h, s, e) for i, h, s, e in cursor.fetchall()}
            waiting = held_in_outbox(self.connection, [j for j in job_ids if j not in jobs])
            for run_id, job_id in runs:
                job = jobs.get(_id(job_id))
                if job is None and _id(job_id) not in waiting:
                    found.append((_id(run_id), _id(job_id), "", "missing", ""))
                elif job is not None and job[1] in JOB_GAVE_UP:
                    found.append((_id(run_id), _id(job_id), job[0], job[1], job[2] or ""))
        return found[:limit]

    def job_gave_up(self, job_id: UUID) -> bool:
        """Whether the job still stands given up (dead, failed, cancelled) or is gone; share-locked on
        PostgreSQL, so an operator's retry of it commits before this answer or waits for our transaction.

        With the queue in its own database the lock is taken there, in a transaction of its own that ends
        with this answer: an operator's retry committed after it is then not seen (the run is failed though
        its job runs again; that job then finds the run ended and does nothing)."""
        if is_split():
            if held_in_outbox(self.connection, [job_id]):
                return False
            with connections[queue_database()].cursor() as cursor:
                cursor.execute("SELECT status FROM jobs_job WHERE id = %s", [job_id])
                rows = cursor.fetchall()
            return not rows or rows[0][0] in JOB_GAVE_UP
        lock = " FOR SHARE" if self._for_update else ""
        rows = self._rows(
            f"SELECT status FROM jobs_job WHERE id = %s{lock}", [self._prep(WorkflowExecution, "next_job_id", job_id)]
        )
        return not rows or rows[0][0] in JOB_GAVE_UP

    def next_jobs_of_contact(self, contact_id: int) -> list[UUID]:
        """The jobs that hold this contact's runs (each run's next move)."""
        rows = self._rows(
            f"SELECT next_job_id FROM {RUN_TABLE} WHERE contact_id = %s AND next_job_id IS NOT NULL", [contact_id]
        )
        return [_id(job_id) for (job_id,) in rows]

    def event_candidates(self, account_id: int, name: str, tag: str | None) -> list[tuple[int, UUID]]:
        """(workflow id, current version id) of the account's active workflows triggered by this event."""
        sql = (
            "SELECT w.id, w.current_version_id FROM workflows_workflow w"
            " JOIN workflows_workflowversion v ON v.id = w.current_version_id"
            " WHERE w.account_id = %s AND w.status = 'active' AND v.trigger_type = 'event' AND v.trigger_event = %s"
        )
        params: list[Any] = [account_id, name]
        if tag is not None:
            sql += " AND (v.trigger_tag = '' OR v.trigger_tag = %s)"
            params.append(tag)
        return [(wid, _id(vid)) for wid, vid in self._rows(sql + " ORDER BY w.id", params)]
