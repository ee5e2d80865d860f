"""The ledger's statements (`OutboundMessage`): plain SQL, because the write that lets a message go is also the
frequency caps' check, and that is one statement.

`let_through` inserts the row in status `sending` only while every cap that applies still has room, counted in
the same statement (`INSERT ... SELECT ... WHERE (SELECT count(*) ...) < limit AND ...`), or moves a row of the
same key that did not go (deferred, refused, failed) to `sending` under the same condition. A statement alone
is not exact on PostgreSQL under READ COMMITTED: two of them may count the same snapshot. The caller holds the
contact's row lock (`FOR NO KEY UPDATE`, taken by an earlier statement of the same transaction), so the count's
snapshot, taken when this statement starts, sees every competitor that committed before the lock was granted.
SQLite serialises writers (IMMEDIATE transactions). docs/decisions/the-door-and-the-ledger.md.

Every time written is the database's clock: `statement_timestamp()` on PostgreSQL; on SQLite, one host, whose
clock is the database's (`jobs.infrastructure.clock.host_now`, passed as a parameter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field
from django.utils import timezone

from integrations.infrastructure.models import OutboundMessage

TABLE = OutboundMessage._meta.db_table
Status = OutboundMessage.Status
# What a cap counts: messages the door let go, whether or not their provider call has ended.
COUNTED = (Status.SENDING.value, Status.SENT.value)


@dataclass(frozen=True)
class NewMessage:
    """A message as the ledger records it (its row's columns that do not change)."""

    key: str
    channel: str
    purpose: str
    address: str
    account_id: int | None = None
    contact_id: int | None = None
    workflow_id: int | None = None
    version_id: UUID | None = None
    run_id: UUID | None = None
    step_key: str = ""
    split_path: str = ""
    job_id: UUID | None = None


@dataclass(frozen=True)
class CapCount:
    """One frequency cap as SQL counts it: fewer than `limit` of the contact's counted messages of `purposes`
    (and `channel`, None: every channel) since `since` (inclusive for calendar days, exclusive for rolling
    hours, as the pure rule has it: `FrequencyCap.since`)."""

    limit: int
    since: datetime
    inclusive: bool
    purposes: tuple[str, ...]
    channel: str | None = None


@dataclass(frozen=True)
class LedgerRow:
    id: int
    status: str
    provider: str
    provider_message_id: str
    provider_calls: int
    deferred_until: datetime | None
    reason: str
    rule: str
    code: str


class _Dialect:
    """What differs between PostgreSQL and SQLite in these statements: parameter types, now, JSON appends."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.postgres = connection.vendor == "postgresql"

    def p(self, kind: str) -> str:
        """A placeholder; typed on PostgreSQL (server-side binding cannot guess `SELECT $1`'s type)."""
        return f"%s::{kind}" if self.postgres else "%s"

    def now(self) -> tuple[str, list[Any]]:
        if self.postgres:
            return "statement_timestamp()", []
        return "%s", [self.connection.ops.adapt_datetimefield_value(timezone.now())]

    def entry(self, status: str, detail: str) -> tuple[str, list[Any]]:
        """One history entry `{"status", "at", "detail"}`, `at` on the database's clock."""
        if self.postgres:
            sql = "jsonb_build_object('status', %s::text, 'at', statement_timestamp(), 'detail', %s::text)"
            return sql, [status, detail]
        return "json_object('status', %s, 'at', %s, 'detail', %s)", [status, _iso(timezone.now()), detail]

    def new_history(self, status: str, detail: str) -> tuple[str, list[Any]]:
        sql, params = self.entry(status, detail)
        return (f"jsonb_build_array({sql})" if self.postgres else f"json_array({sql})"), params

    def append(self, column: str, status: str, detail: str) -> tuple[str, list[Any]]:
        sql, params = self.entry(status, detail)
        if self.postgres:
            return f"{column} || jsonb_build_array({sql})", params
        return f"json_insert({column}, '$[#]', {sql})", params

    def append_excluded(self) -> str:
        """On conflict: the row's history followed by the one entry the refused insert carried."""
        if self.postgres:
            return f"{TABLE}.history || EXCLUDED.history"
        return f"json_insert({TABLE}.history, '$[#]', json(EXCLUDED.history -> '$[0]'))"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _prep(name: str, value: Any, connection: Any) -> Any:
    """A value as the column's field stores it on this database (a UUID is 32 hex digits on SQLite)."""
    field = OutboundMessage._meta.get_field(name)
    assert isinstance(field, Field)
    return field.get_db_prep_value(value, connection, prepared=False)


class Ledger:
    """The ledger's reads and writes on one database (the one that holds contacts: `default`)."""

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using

    @property
    def connection(self) -> Any:
        return connections[self.using]

    def _upsert(
        self,
        message: NewMessage,
        *,
        status: str,
        detail: str,
        caps: Sequence[CapCount] = (),
        rule: str = "",
        code: str = "",
        reason: str = "",
        until: datetime | None = None,
    ) -> int | None:
        """Insert the message's row, or move the row of its key that has not gone (not sending, not sent) to
        `status`; with `caps`, only while each has room. The row's id, or None when nothing was written."""
        connection = self.connection
        d = _Dialect(connection)
        now_sql, now_params = d.now()
        history_sql, history_params = d.new_history(status, detail)
        sending = status == Status.SENDING
        columns = [
            ("account_id", d.p("bigint"), message.account_id),
            ("contact_id", d.p("bigint"), message.contact_id),
            ("channel", d.p("text"), message.channel),
            ("purpose", d.p("text"), message.purpose),
            ("address", d.p("text"), message.address[:320]),
            ("idempotency_key", d.p("text"), message.key),
            ("workflow_id", d.p("bigint"), message.workflow_id),
            ("version_id", d.p("uuid"), _prep("version_id", message.version_id, connection)),
            ("run_id", d.p("uuid"), _prep("run_id", message.run_id, connection)),
            ("step_key", d.p("text"), message.step_key[:100]),
            ("split_path", d.p("text"), message.split_path[:100]),
            ("job_id", d.p("uuid"), _prep("job_id", message.job_id, connection)),
            ("status", d.p("text"), status),
            ("rule", d.p("text"), rule),
            ("code", d.p("text"), code),
            ("reason", d.p("text"), reason),
            ("deferred_until", d.p("timestamptz"), _prep("deferred_until", until, connection)),
            ("provider_calls", d.p("integer"), 1 if sending else 0),
        ]
        names = [name for name, _, _ in columns]
        values = [sql for _, sql, _ in columns]
        params: list[Any] = [value for _, _, value in columns]
        names += ["history", "provider", "provider_message_id", "error", "created_at", "updated_at", "sending_at"]
        values += [history_sql, "''", "''", "''", now_sql, now_sql, now_sql if sending else "NULL"]
        params += history_params + now_params + now_params + (now_params if sending else [])
        where, where_params = self._room(d, message, caps)
        params += where_params
        calls = f"{TABLE}.provider_calls + 1" if sending else f"{TABLE}.provider_calls"
        sql = (
            f"INSERT INTO {TABLE} ({', '.join(names)}) SELECT {', '.join(values)} WHERE {where} "
            f"ON CONFLICT (idempotency_key) DO UPDATE SET status = EXCLUDED.status, "
            f"history = {d.append_excluded()}, address = EXCLUDED.address, rule = EXCLUDED.rule, "
            f"code = EXCLUDED.code, reason = EXCLUDED.reason, deferred_until = EXCLUDED.deferred_until, "
            f"error = '', updated_at = EXCLUDED.updated_at, sending_at = EXCLUDED.sending_at, "
            f"provider_calls = {calls} "
            f"WHERE {TABLE}.status NOT IN ('{Status.SENDING.value}', '{Status.SENT.value}') RETURNING id"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def _room(d: _Dialect, message: NewMessage, caps: Sequence[CapCount]) -> tuple[str, list[Any]]:
        """Each cap as `(SELECT count(*) ...) < limit`: one index range (contact, sending_at) per cap."""
        if not caps or message.contact_id is None:
            return "1 = 1", []
        conditions, params = [], []
        counted = ", ".join(f"'{status}'" for status in COUNTED)
        for cap in caps:
            purposes = ", ".join(d.p("text") for _ in cap.purposes)
            channel = f" AND c.channel = {d.p('text')}" if cap.channel is not None else ""
            compare = ">=" if cap.inclusive else ">"
            conditions.append(
                f"(SELECT count(*) FROM {TABLE} c WHERE c.contact_id = {d.p('bigint')} "
                f"AND c.sending_at {compare} {d.p('timestamptz')} AND c.status IN ({counted}) "
                f"AND c.purpose IN ({purposes}){channel}) < {d.p('bigint')}"
            )
            params += [message.contact_id, d.connection.ops.adapt_datetimefield_value(cap.since), *cap.purposes]
            params += [cap.channel] if cap.channel is not None else []
            params.append(cap.limit)
        return " AND ".join(conditions), params

    def let_through(self, message: NewMessage, caps: Sequence[CapCount] = (), *, detail: str = "") -> int | None:
        """Record that `message` goes now (status sending, counted by the caps from the statement's now) if every
        cap in `caps` has room and no row of its key has gone yet: its row's id, or None (a cap is full, or the
        key's row is sending or sent: `find` says which)."""
        return self._upsert(message, status=Status.SENDING, detail=detail, caps=caps)

    def hold(
        self, message: NewMessage, *, status: str, rule: str, code: str, reason: str, until: datetime | None
    ) -> int | None:
        """Record that `message` did not go (deferred until `until`, or refused), unless a row of its key has
        gone (sending, sent): its row's id, or None."""
        return self._upsert(message, status=status, detail=reason, rule=rule, code=code, reason=reason, until=until)

    def find(self, key: str) -> LedgerRow | None:
        row = (
            OutboundMessage.objects.using(self.using)
            .filter(idempotency_key=key)
            .values_list(
                "id",
                "status",
                "provider",
                "provider_message_id",
                "provider_calls",
                "deferred_until",
                "reason",
                "rule",
                "code",
            )
            .first()
        )
        return LedgerRow(*row) if row is not None else None

    def counted_since(self, contact_id: int, since: datetime) -> list[tuple[datetime, str, str]]:
        """The contact's counted messages since `since` (inclusive): (sending_at, channel, purpose)."""
        rows = (
            OutboundMessage.objects.using(self.using)
            .filter(contact_id=contact_id, sending_at__gte=since, status__in=COUNTED)
            .values_list("sending_at", "channel", "purpose")
        )
        return [(at, channel, purpose) for at, channel, purpose in rows if at is not None]

    def _update(
        self, message_id: int, sets: str, params: list[Any], *, status: str, detail: str, only: str = ""
    ) -> bool:
        d = _Dialect(self.connection)
        now_sql, now_params = d.now()
        history_sql, history_params = d.append("history", status, detail)
        sql = (
            f"UPDATE {TABLE} SET status = {d.p('text')}, {sets}, history = {history_sql}, updated_at = {now_sql} "
            f"WHERE id = {d.p('bigint')}{only}"
        )
        with self.connection.cursor() as cursor:
            cursor.execute(sql, [status, *params, *history_params, *now_params, message_id])
            return bool(cursor.rowcount)

    def mark_sent(self, message_id: int, *, provider: str, provider_message_id: str) -> None:
        """The provider accepted it: never sent again."""
        d = _Dialect(self.connection)
        now_sql, now_params = d.now()
        self._update(
            message_id,
            f"provider = {d.p('text')}, provider_message_id = {d.p('text')}, error = '', sent_at = {now_sql}",
            [provider[:32], provider_message_id[:255], *now_params],
            status=Status.SENT,
            detail="",
        )

    def mark_failed(self, message_id: int, *, error: str) -> None:
        """The call failed (the error as the queue stores it): not counted; a retry may send it."""
        d = _Dialect(self.connection)
        self._update(message_id, f"error = {d.p('text')}", [error[:1000]], status=Status.FAILED, detail=error[:200])

    def begin_resend(self, message_id: int, *, detail: str) -> bool:
        """A retry found the row still `sending` (the attempt that wrote it died before it knew the outcome):
        counts the provider call it is about to make again. False if the row is no longer sending."""
        return self._update(
            message_id,
            "provider_calls = provider_calls + 1",
            [],
            status=Status.SENDING,
            detail=detail,
            only=f" AND status = '{Status.SENDING.value}'",
        )
