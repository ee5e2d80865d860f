"""The contact writes on the workflow engine's hot path, as plain rows and plain SQL.

Tagging and updating contacts happen in most steps of most runs. Building
model instances, running full_clean() and saving through the ORM cost more
CPU than the change itself; here a change is one locked read and one
UPDATE of the changed columns. The services in contacts.application keep
every rule and every event; this module only reads and writes rows.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.db import connections, models

from contacts.domain.model import MAX_TAGS, tags_full, with_tag, without_tag
from contacts.infrastructure.models import Contact
from kernel import clock

TABLE = Contact._meta.db_table
COLUMNS: tuple[str, ...] = tuple(cast(str, f.column) for f in Contact._meta.concrete_fields)
_JSON_COLUMNS = frozenset({"tags", "custom_fields"})
_ATTNAME = {cast(str, f.column): f.attname for f in Contact._meta.concrete_fields}  # column -> model attribute


class ContactStore:
    def __init__(self, using: str = "default") -> None:
        self.connection = connections[using]

    def add_tag(self, contact_id: int, tag: str) -> tuple[dict[str, Any], bool]:
        """Append a normalized tag unless the contact has it: (the row as it is now, whether it was added)."""
        if self.connection.vendor != "postgresql":
            row = self.lock(contact_id)
            if tags_full(row["tags"], tag):
                return row, False  # the service refuses it, outside the caller's transaction
            row["tags"], added = with_tag(row["tags"], tag)
            if added:
                row["updated_at"] = self.update(contact_id, {"tags": row["tags"]})
            return row, added
        # One statement: the row lock, the membership test, the per-contact limit and the append.
        return self._changed_or_current(
            contact_id,
            f"UPDATE {TABLE} SET tags = tags || jsonb_build_array(%s::text), updated_at = statement_timestamp()"
            f" WHERE id = %s AND NOT jsonb_exists(tags, %s) AND jsonb_array_length(tags) < %s"
            f" RETURNING {', '.join(COLUMNS)}",
            [tag, contact_id, tag, MAX_TAGS],
        )

    def remove_tag(self, contact_id: int, tag: str) -> tuple[dict[str, Any], bool]:
        """Remove a normalized tag if the contact has it: (the row as it is now, whether it was removed)."""
        if self.connection.vendor != "postgresql":
            row = self.lock(contact_id)
            row["tags"], removed = without_tag(row["tags"], tag)
            if removed:
                row["updated_at"] = self.update(contact_id, {"tags": row["tags"]})
            return row, removed
        return self._changed_or_current(
            contact_id,
            f"UPDATE {TABLE} SET tags = tags - %s::text, updated_at = statement_timestamp()"
            f" WHERE id = %s AND jsonb_exists(tags, %s) RETURNING {', '.join(COLUMNS)}",
            [tag, contact_id, tag],
        )

    def _changed_or_current(self, contact_id: int, sql: str, params: list[Any]) -> tuple[dict[str, Any], bool]:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
        if found is not None:
            return self._row(found), True
        return self.lock(contact_id), False  # nothing to change (or no such contact: DoesNotExist)

    def _row(self, values: tuple) -> dict[str, Any]:
        return row_from_db(values)

    def lock(self, contact_id: int) -> dict[str, Any]:
        """The contact's row, locked until the caller's transaction ends; Contact.DoesNotExist if none.

        FOR NO KEY UPDATE, the lock an UPDATE of non-key columns takes anyway: it serializes the contact's
        writers but not the inserts of rows that reference it (runs and consent records take FOR KEY SHARE on
        it through their foreign key). FOR UPDATE would block them and invite deadlocks: a run start
        holds its account's lock while inserting the run; a contact change holds the contact, then locks the
        account to start the runs its event triggers.
        """
        lock = " FOR NO KEY UPDATE" if self.connection.vendor == "postgresql" else ""  # SQLite: one writer anyway
        with self.connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE id = %s{lock}", [contact_id])
            found = cursor.fetchone()
        if found is None:
            raise Contact.DoesNotExist(f"no contact with id {contact_id}")
        return self._row(found)

    def lock_for_delete(self, contact_id: int) -> Contact:
        """Lock what a delete of the contact removes, in the order every other path locks it: the rows that
        reference the contact first (its runs: a step locks its run, then the contact it changes; its consent
        records), each table by id, then the contact itself FOR UPDATE (a delete needs the key lock).

        Reads the relations from the model's metadata, so contacts need not know who references them.
        Rows inserted after the first reads and before the contact's lock are not locked here (a run started
        in that instant); the delete still removes them.
        """
        for relation in Contact._meta.get_fields(include_hidden=True):  # runs' relation is hidden (related_name="+")
            if not (
                isinstance(relation, models.ForeignObjectRel)
                and relation.auto_created
                and relation.one_to_many
                and relation.on_delete is models.CASCADE
            ):
                continue
            rows = relation.related_model._base_manager.using(self.connection.alias)
            list(rows.filter(**{relation.field.name: contact_id}).order_by("pk").select_for_update().values_list("pk"))
        return Contact.objects.using(self.connection.alias).select_for_update().get(pk=contact_id)

    def update(self, contact_id: int, changes: dict[str, Any]) -> Any:
        """Write the changed columns (and updated_at, the database's now for this unit of work: kernel.clock);
        returns the new updated_at."""
        now = clock.now()
        values = {**changes, "updated_at": now}
        fields = [cast(models.Field, Contact._meta.get_field(name)) for name in values]
        params = [field.get_db_prep_save(values[field.name], self.connection) for field in fields]
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {TABLE} SET {', '.join(f'{f.column} = %s' for f in fields)} WHERE id = %s",
                [*params, contact_id],
            )
        return now

    def email_taken(self, account_id: int, email: str, contact_id: int) -> bool:
        with self.connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {TABLE} WHERE account_id = %s AND email = %s AND id <> %s LIMIT 1",
                [account_id, email, contact_id],
            )
            return cursor.fetchone() is not None


def row_from_db(values: tuple) -> dict[str, Any]:
    """A contact's row as the services use it, from the values of COLUMNS in order."""
    row = dict(zip(COLUMNS, values, strict=True))
    for name in _JSON_COLUMNS:
        if isinstance(row[name], str | bytes):
            row[name] = json.loads(row[name])
    return row


def as_contact(row: dict[str, Any], using: str = "default") -> Contact:
    """A Contact built from a row that was just read or written (no query)."""
    contact = Contact(**{_ATTNAME[c]: v for c, v in row.items() if c != "id"}, id=row["id"])
    contact._state.adding = False
    contact._state.db = using
    return contact
