"""Importing contacts from a CSV or XLSX file: upload, map the columns, check every row, import all or nothing.

The work runs on the queue (`contacts.import` jobs), so a file of 200,000 rows never holds a request open.
A check reads every row before anything is written: one bad row refuses the file, naming each problem by
row and column, and nothing is stored. An import writes every contact in one transaction and publishes
the same events as the API (`contact.created`, `contact.updated`, `tag.added`), so workflows start as
they would for contacts added one by one; what the caller asked to follow (`then`, jobs such as an
enrollment into a workflow) is queued in that same transaction.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from contacts.application import events
from contacts.application.services import contact_add_tag, contact_update
from contacts.domain.imports import (
    MAX_ERRORS_KEPT,
    MAX_ROWS,
    TAGS,
    ImportedRow,
    RowProblem,
    duplicate_problems,
    guess_target,
    mapping_problems,
    read_row,
    tag_limit_problem,
)
from contacts.domain.model import ContactError, normalize_tag
from contacts.infrastructure.models import Contact, ContactImport
from jobs.application.context import JobContext
from jobs.application.queue import JobSpec, enqueue
from jobs.application.registry import job_handler

IMPORT_HANDLER = "contacts.import"
MAX_BYTES = 50 * 1024 * 1024
SAMPLE_ROWS = 8
CREATE_CHUNK = 2000


class ImportRefused(ValueError):
    """The file or the mapping cannot be used; the message says why in plain words."""


# --- reading files -----------------------------------------------------------------------------
def _rows(content: bytes, filename: str) -> Iterator[list[str]]:
    if filename.lower().endswith((".xlsx", ".xlsm")):
        yield from _xlsx_rows(content)
        return
    yield from _csv_rows(content)


def _csv_rows(content: bytes) -> Iterator[list[str]]:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = content.decode("latin-1")  # what spreadsheet programs often save
    try:
        dialect = csv.Sniffer().sniff(text[:20_000], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    for row in csv.reader(io.StringIO(text), dialect):
        yield [cell.strip() for cell in row]


def _xlsx_rows(content: bytes) -> Iterator[list[str]]:
    from openpyxl import load_workbook

    try:
        book = load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    except Exception:
        raise ImportRefused("This is not an Excel file Relay can read (save it as .xlsx or .csv).") from None
    try:
        sheet = book.worksheets[0]
        for values in sheet.iter_rows(values_only=True):
            yield [_cell(v) for v in values]
    finally:
        book.close()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 15550100000.0 is a phone number, not a float
    return str(value).strip()


def _non_empty(rows: Iterator[list[str]]) -> Iterator[list[str]]:
    return (row for row in rows if any(cell for cell in row))


# --- the steps ---------------------------------------------------------------------------------
def import_upload(*, account_id: int, filename: str, content: bytes, created_by_id: int | None = None) -> ContactImport:
    """Store an uploaded file with its header, a sample and a guessed mapping; ImportRefused says why not."""
    if not filename.lower().endswith((".csv", ".txt", ".xlsx", ".xlsm")):
        raise ImportRefused("Upload a .csv or .xlsx file.")
    if len(content) > MAX_BYTES:
        raise ImportRefused(f"The file is larger than {MAX_BYTES // (1024 * 1024)} MB: split it in parts.")
    rows = _non_empty(_rows(content, filename))
    header = next(rows, None)
    if not header:
        raise ImportRefused("The file is empty: its first row should name the columns (email, first name…).")
    sample, count = [], 0
    for row in rows:
        if count < SAMPLE_ROWS:
            sample.append(row)
        count += 1
        if count > MAX_ROWS:
            raise ImportRefused(f"The file has more than {MAX_ROWS:,} contacts: split it in parts.")
    if count == 0:
        raise ImportRefused("The file has a header but no contacts under it.")
    return ContactImport.objects.create(
        account_id=account_id,
        created_by_id=created_by_id,
        filename=filename[:255],
        content=content,
        header=header,
        sample=sample,
        row_count=count,
        mapping=[guess_target(h) for h in header],
        options={"existing": "update", "tag": ""},
    )


def import_configure(
    *, import_id: int, mapping: Sequence[str], existing: str = "update", tag: str = "", then: Sequence[JobSpec] = ()
) -> ContactImport:
    """Set the column mapping and what to do; ImportRefused names what is wrong with them."""
    record = ContactImport.objects.get(pk=import_id)
    mapping = [str(target) for target in mapping][: len(record.header)]
    mapping += [""] * (len(record.header) - len(mapping))
    problems = mapping_problems(mapping)
    if existing not in ("update", "skip"):
        problems.append("Choose whether contacts already here are updated or left as they are.")
    if tag:
        try:
            tag = normalize_tag(tag)
        except ContactError as error:
            problems.append(f"The tag for everyone: {error.reason}.")
    if problems:
        raise ImportRefused(" ".join(problems))
    record.mapping = mapping
    record.options = {"existing": existing, "tag": tag, "then": [_spec_dict(spec) for spec in then]}
    record.save(update_fields=["mapping", "options", "updated_at"])
    return record


def import_queue(*, import_id: int, dry_run: bool = False) -> ContactImport:
    """Queue the check (dry_run) or the import itself."""
    with transaction.atomic():
        record = ContactImport.objects.select_for_update().get(pk=import_id)
        if record.status in (ContactImport.Status.IMPORTED, ContactImport.Status.QUEUED):
            raise ImportRefused(f"This import is {record.get_status_display()}.")
        record.status = ContactImport.Status.QUEUED
        record.save(update_fields=["status", "updated_at"])
        enqueue(IMPORT_HANDLER, {"import_id": record.pk, "dry_run": dry_run}, account=record.account_id)
    return record


def import_note_follow_up(*, import_id: int, text: str) -> None:
    """What follows an import (an enrollment) says how far it got; shown on the import's page."""
    ContactImport.objects.filter(pk=import_id).update(follow_up=text[:500])


def imported_contact_ids(*, import_id: int, account_id: int) -> list[int]:
    record = ContactImport.objects.filter(pk=import_id, account_id=account_id).values("contact_ids").first()
    return list(record["contact_ids"]) if record else []


def _spec_dict(spec: JobSpec) -> dict[str, Any]:
    data = asdict(spec)
    data.pop("run_at", None)
    return data


# --- the job -----------------------------------------------------------------------------------
@job_handler(IMPORT_HANDLER)
def run_import(payload: dict[str, Any], job: JobContext) -> None:
    record = ContactImport.objects.get(pk=payload["import_id"])
    record.status = ContactImport.Status.CHECKING
    record.save(update_fields=["status", "updated_at"])
    rows, problems = check_rows(record)
    with transaction.atomic():
        if problems:
            _refuse(record, problems)
        elif payload.get("dry_run"):
            new, existing = _split_existing(record.account_id, rows)
            record.status = ContactImport.Status.CHECKED
            record.problems, record.problem_count = [], 0
            record.created_count, record.updated_count = len(new), len(existing)
            record.save(update_fields=["status", "problems", "problem_count", "created_count", "updated_count"])
        else:
            _write(record, rows)
            then = [JobSpec(**spec) for spec in record.options.get("then", [])]
            job.mark_completed(then=then)
            return
        job.mark_completed()


def check_rows(record: ContactImport) -> tuple[list[ImportedRow], list[RowProblem]]:
    """Every row read and checked; no write."""
    rows: list[ImportedRow] = []
    problems: list[RowProblem] = []
    all_rows = _non_empty(_rows(bytes(record.content), record.filename))
    next(all_rows, None)  # the header
    for number, cells in enumerate(all_rows, start=2):
        row, row_problems = read_row(number, cells, record.header, record.mapping)
        if row.fields.get("email") and not row_problems:
            try:
                validate_email(row.fields["email"])
            except ValidationError:
                row_problems.append(RowProblem(number, _column(record, "email"), "is not a valid email address"))
        problems.extend(row_problems)
        rows.append(row)
    problems.extend(duplicate_problems(rows, {"email": _column(record, "email")}))
    problems.extend(_tag_limit_problems(record, rows, refused={p.row for p in problems}))
    problems.sort(key=lambda p: p.row)
    return rows, problems


def _tag_limit_problems(record: ContactImport, rows: list[ImportedRow], refused: set[int]) -> list[RowProblem]:
    """Rows that would take their contact past MAX_TAGS: a new one by its own tags and the tag for everyone,
    one already here by the tags it has too (unless existing contacts are left as they are)."""
    everyone = record.options.get("tag") or ""
    skip_existing = record.options.get("existing") == "skip"
    known = _known(record.account_id, rows)
    column = _column(record, TAGS)
    problems = []
    for row in rows:
        email = row.fields.get("email")
        if row.number in refused or (skip_existing and email in known):
            continue
        has = known[email][1] if email in known else []
        problem = tag_limit_problem(row, column, has=has, everyone=everyone)
        if problem is not None:
            problems.append(problem)
    return problems


def _column(record: ContactImport, target: str) -> str:
    return next((h for h, t in zip(record.header, record.mapping, strict=False) if t == target), target)


def _refuse(record: ContactImport, problems: list[RowProblem]) -> None:
    record.status = ContactImport.Status.REFUSED
    record.problems = [p.as_dict() for p in problems[:MAX_ERRORS_KEPT]]
    record.problem_count = len(problems)
    record.save(update_fields=["status", "problems", "problem_count", "updated_at"])


def _known(account_id: int, rows: list[ImportedRow]) -> dict[str, tuple[int, list[str]]]:
    """{email: (contact id, its tags)} for the rows' emails already in the account."""
    emails = [row.fields["email"] for row in rows if row.fields.get("email")]
    known: dict[str, tuple[int, list[str]]] = {}
    for start in range(0, len(emails), 5000):
        chunk = emails[start : start + 5000]
        found = Contact.objects.filter(account_id=account_id, email__in=chunk).values_list("pk", "email", "tags")
        for pk, email, tags in found:
            known[email.lower()] = (pk, list(tags or []))
    return known


def _split_existing(account_id: int, rows: list[ImportedRow]) -> tuple[list[ImportedRow], dict[int, int]]:
    """The rows of new contacts, and {row index: contact id} for emails already in the account."""
    known = _known(account_id, rows)
    existing = {i: known[row.fields["email"]][0] for i, row in enumerate(rows) if row.fields.get("email") in known}
    new = [row for i, row in enumerate(rows) if i not in existing]
    return new, existing


def _write(record: ContactImport, rows: list[ImportedRow]) -> None:
    """Every contact, in the caller's transaction; the same events as one-by-one writes."""
    account_id = record.account_id
    everyone_tag = record.options.get("tag") or ""
    new, existing = _split_existing(account_id, rows)
    ids: list[int] = []
    updated = skipped = 0
    for index, contact_id in existing.items():
        if record.options.get("existing") == "skip":
            skipped += 1
            continue
        row = rows[index]
        changes: dict[str, Any] = {k: v for k, v in row.fields.items() if v and k != "email"}
        if row.custom_fields:
            changes["custom_fields"] = row.custom_fields
        if changes:
            contact_update(contact_id=contact_id, fields=changes)
        for tag in [*row.tags, *([everyone_tag] if everyone_tag else [])]:
            contact_add_tag(contact_id=contact_id, tag=tag)
        ids.append(contact_id)
        updated += 1
    for start in range(0, len(new), CREATE_CHUNK):
        chunk = new[start : start + CREATE_CHUNK]
        contacts = [
            Contact(
                account_id=account_id,
                email=row.fields.get("email", ""),
                phone=row.fields.get("phone", ""),
                first_name=row.fields.get("first_name", ""),
                last_name=row.fields.get("last_name", ""),
                custom_fields=row.custom_fields,
                tags=list(dict.fromkeys([*row.tags, *([everyone_tag] if everyone_tag else [])])),
            )
            for row in chunk
        ]
        Contact.objects.bulk_create(contacts)
        if any(c.pk is None for c in contacts):  # a backend that does not return ids (none we support)
            raise RuntimeError("bulk_create returned no ids")
        for contact in contacts:
            events.publish(events.ContactEvent(account_id, contact.pk, events.CONTACT_CREATED, {}))
            for tag in contact.tags:
                events.publish(events.ContactEvent(account_id, contact.pk, events.TAG_ADDED, {"tag": tag}))
            ids.append(contact.pk)
    record.status = ContactImport.Status.IMPORTED
    record.created_count, record.updated_count, record.skipped_count = len(new), updated, skipped
    record.contact_ids = ids
    record.problems, record.problem_count = [], 0
    record.content = b""  # the contacts are in; the file's personal data need not stay twice
    record.save()


def import_options_label(options: Mapping[str, Any]) -> str:
    return "update contacts already here" if options.get("existing") == "update" else "leave existing contacts"
