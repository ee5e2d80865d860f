"""Reading a spreadsheet of contacts: which column means what, and what is wrong with a row. Plain Python.

A column maps to a contact field (email, phone, first or last name, time zone), to the contact's tags (comma
separated), to a custom field, or to nothing. Every row is checked before anything is written; a file with
any bad row is refused whole, its problems listed by row and column, so nothing is ever half-imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contacts.domain.clock import normalize_time_zone
from contacts.domain.model import MAX_TAGS, ContactError, normalize_phone, normalize_tag, too_many_tags, with_tag

FIELDS = ("email", "phone", "first_name", "last_name", "time_zone")
TAGS = "tags"
IGNORE = ""
CUSTOM_PREFIX = "custom:"
MAX_ERRORS_KEPT = 200
_CUSTOM_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_GUESSES = {
    "email": ("email", "e-mail", "emailaddress", "mail"),
    "phone": ("phone", "phonenumber", "mobile", "cell", "tel", "telephone"),
    "first_name": ("firstname", "first", "givenname", "forename", "name"),
    "last_name": ("lastname", "last", "surname", "familyname"),
    "time_zone": ("timezone", "tz", "zone", "timezonename"),
    TAGS: ("tags", "tag", "labels", "lists"),
}


def custom_key(header: str) -> str:
    """A header as a custom field name: `Plan type` -> `plan_type`."""
    key = re.sub(r"[^A-Za-z0-9]+", "_", header.strip()).strip("_").lower()
    if key and not key[0].isalpha():
        key = f"f_{key}"
    return key[:64]


def guess_target(header: str) -> str:
    """What a column probably is, from its header; unknown headers become custom fields."""
    folded = re.sub(r"[^a-z]", "", header.lower())
    for target, names in _GUESSES.items():
        if folded in names:
            return target
    key = custom_key(header)
    return f"{CUSTOM_PREFIX}{key}" if key else IGNORE


def mapping_problems(mapping: Sequence[str]) -> list[str]:
    """Why a column mapping cannot be used, or []."""
    problems = []
    for target in (*FIELDS, TAGS):
        if list(mapping).count(target) > 1:
            problems.append(f"Two columns are mapped to {target.replace('_', ' ')}: keep one.")
    customs = [t for t in mapping if t.startswith(CUSTOM_PREFIX)]
    for target in customs:
        name = target.removeprefix(CUSTOM_PREFIX)
        if not _CUSTOM_KEY.fullmatch(name):
            problems.append(f"“{name}” cannot be a custom field name: a letter, then letters, digits or _.")
        elif customs.count(target) > 1:
            problems.append(f"Two columns are mapped to the custom field {name}: keep one.")
    if "email" not in mapping and "phone" not in mapping:
        problems.append("Map a column to email or to phone: a contact needs one of them.")
    return problems


@dataclass(slots=True)
class ImportedRow:
    number: int  # as a spreadsheet numbers it: the header is row 1
    fields: dict[str, str] = field(default_factory=dict)
    custom_fields: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RowProblem:
    row: int
    column: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"row": self.row, "column": self.column, "message": self.message}


def read_row(
    number: int, cells: Sequence[str], header: Sequence[str], mapping: Sequence[str]
) -> tuple[ImportedRow, list[RowProblem]]:
    """One row as a contact, or the problems that keep it out (every one of them)."""
    row = ImportedRow(number)
    problems: list[RowProblem] = []
    for index, target in enumerate(mapping):
        if target == IGNORE:
            continue
        value = (cells[index] if index < len(cells) else "").strip()
        column = header[index] if index < len(header) else f"column {index + 1}"
        if target == "email":
            if value and (len(value) > 254 or not _EMAIL.fullmatch(value)):
                problems.append(RowProblem(number, column, f"“{value[:80]}” is not an email address"))
            row.fields["email"] = value.lower()
        elif target == "phone":
            try:
                row.fields["phone"] = normalize_phone(value)
            except ContactError as error:
                problems.append(RowProblem(number, column, f"“{value[:40]}”: {error.reason}"))
        elif target == "time_zone":
            try:
                row.fields["time_zone"] = normalize_time_zone(value)
            except ContactError as error:
                problems.append(RowProblem(number, column, error.reason))
        elif target in FIELDS:
            if len(value) > 150:
                problems.append(RowProblem(number, column, "is longer than 150 characters"))
            row.fields[target] = value
        elif target == TAGS:
            for raw in value.split(","):
                if raw.strip():
                    try:
                        row.tags.append(normalize_tag(raw))
                    except ContactError as error:
                        problems.append(RowProblem(number, column, f"tag “{raw.strip()[:40]}”: {error.reason}"))
            if len(dict.fromkeys(row.tags)) > MAX_TAGS:  # the contacts' own limit, as on every other path
                problems.append(RowProblem(number, column, too_many_tags().reason))
        elif target.startswith(CUSTOM_PREFIX) and value:
            row.custom_fields[target.removeprefix(CUSTOM_PREFIX)] = value
    if not row.fields.get("email") and not row.fields.get("phone") and not problems:
        problems.append(RowProblem(number, "", "has neither an email address nor a phone number"))
    row.tags = list(dict.fromkeys(row.tags))
    return row, problems


class DuplicateEmails:
    """The same email address twice in one file: which row should win is the marketer's call, not ours.
    Rows are shown in order; only each email's first row is kept."""

    def __init__(self, column: str = "email") -> None:
        self.column = column
        self._first: dict[str, int] = {}

    def seen(self, row: ImportedRow) -> RowProblem | None:
        email = row.fields.get("email")
        if not email:
            return None
        first = self._first.setdefault(email, row.number)
        return None if first == row.number else RowProblem(row.number, self.column, f"{email} is also on row {first}")


def duplicate_problems(rows: Sequence[ImportedRow], header_of: Mapping[str, str]) -> list[RowProblem]:
    """Every row whose email an earlier row has."""
    duplicates = DuplicateEmails(header_of.get("email", "email"))
    return [problem for row in rows if (problem := duplicates.seen(row)) is not None]


def tag_limit_problem(
    row: ImportedRow, column: str, *, has: Sequence[str] = (), everyone: str = ""
) -> RowProblem | None:
    """Whether importing the row would take its contact past MAX_TAGS: the tags it `has` (a contact already
    here, updated), then the row's own and the tag for `everyone`, each added as every path adds a tag
    (`with_tag`). Found before any write, so a full contact refuses the file instead of failing the import."""
    tags = list(has)
    added = [*row.tags, *([everyone] if everyone else [])]
    for tag in added:
        try:
            tags, _ = with_tag(tags, tag)
        except ContactError:
            total = len(dict.fromkeys([*has, *added]))
            parts = [f"{len(has)} it has"] if has else []
            if row.tags:
                parts.append(f"{len(row.tags)} from this row")
            if everyone:
                parts.append(f"“{everyone}” for everyone")
            reason = f"would give the contact {total} tags ({', '.join(parts)}); {too_many_tags().reason}"
            return RowProblem(row.number, column, reason)
    return None
