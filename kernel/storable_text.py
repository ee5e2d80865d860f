"""Text from outside that PostgreSQL can store: no NUL character. Plain Python.

PostgreSQL's `text` and `jsonb` refuse U+0000 (SQLite stores it), and the refusal comes from deep in the
database as a 500 after part of the work may be done. So every way text comes in is checked before anything
is written, once per kind of entry, and refused naming the field:

- form fields, query parameters and the path of every page outside the API: one
  middleware (`config.middleware.RefuseNulMiddleware`, by `field_with_nul`);
- JSON, wherever it comes from (the API's bodies, the admin's JSON fields, a workflow's definition, a run's
  trigger data): `kernel.storable_json.find_unstorable`;
- the API's query parameters and path segments: its declared filters and converters;
- a file's cells (contact imports): `contacts.infrastructure.spreadsheets`, by row and column.

What other servers answer (a webhook receiver's body, a provider's error) is not refused but kept with each
NUL replaced by U+FFFD (`kernel.failures.storable_text`): it is a record of what happened, and refusing it
would lose the record.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernel.storable_json import escaped

NUL = "\x00"
NUL_REASON = "contains a NUL character (a zero byte), which cannot be stored"


def has_nul(text: str) -> bool:
    return NUL in text


def field_with_nul(fields: Iterable[tuple[str, Iterable[str]]]) -> str | None:
    """The first field (name, values) whose name or one of whose values holds a NUL, its name printable
    (`first\\u0000name`) so an error can quote it; None when none does."""
    for name, values in fields:
        if has_nul(name) or any(has_nul(value) for value in values):
            return escaped(name)
    return None
