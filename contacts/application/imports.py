"""Importing contacts from a CSV or XLSX file: upload, map the columns, check every row, import all or nothing.

The work runs on the queue (`contacts.import` jobs), so a file of 200,000 rows never holds a request open.
A check reads every row before anything is written: one bad row refuses the file, naming each problem by
row and column, and nothing is stored. An import writes every contact in one transaction and publishes
the same events as the API (`contact.created`, `contact.updated`, `tag.added`), so workflows start as
they would for contacts added one by one; what the caller asked to follow (`then`, jobs such as an
enrollment into a workflow) is queued in that same transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from contacts.application import events
from contacts.application.services import contact_add_tag, contact_update
from contacts.domain.imports import (
    MAX_ERRORS_KEPT,
    TAGS,
    DuplicateEmails,
    ImportedRow,
    RowProblem,
    guess_target,
    mapping_problems,
    read_row,
    tag_limit_problem,
)
from contacts.domain.model import ContactError, normalize_tag
from contacts.infrastructure.models import Contact, ContactImport
from contacts.infrastructure.spreadsheets import (
    SheetLimits,
    UnreadableFile,
    detect_encoding,
    file_size,
    is_excel,
    read_rows,
)
from jobs.public import JobContext, JobSpec, enqueue, job_handler

IMPORT_HANDLER = "contacts.import"
SAMPLE_ROWS = 8
SAMPLE_CELL_CHARS = 300  # past every field's own limit, so a too-long cell still shows its problem


class ImportRefused(ValueError):
    """The file or the mapping cannot be used; the message says why in plain words."""


# --- limits and reading files -------------------------------------------------------------------
def import_limits() -> SheetLimits:
    """The limits of settings.py (CONTACT_IMPORT_*): a file past one is refused, naming it."""
    return SheetLimits(
        max_bytes=settings.CONTACT_IMPORT_MAX_BYTES,
        max_columns=settings.CONTACT_IMPORT_MAX_COLUMNS,
        max_rows=settings.CONTACT_IMPORT_MAX_ROWS,
        max_cell_chars=settings.CONTACT_IMPORT_MAX_CELL_CHARS,
    )


def check_file_size(size: int) -> None:
    """ImportRefused when a file of `size` bytes is over the limit (the upload page asks before reading it)."""
    limit = settings.CONTACT_IMPORT_MAX_BYTES
    if size > limit:
        raise ImportRefused(
            f"The file is {file_size(size)}; a file may be at most {file_size(limit)}: split it in parts."
        )


def _sample_cells(cells: list[str]) -> list[str]:
    """A row as the mapping page keeps it: each cell cut to what its checks and the preview need."""
    return [cell[:SAMPLE_CELL_CHARS] for cell in cells]


# --- the steps ---------------------------------------------------------------------------------
def import_upload(*, account_id: int, filename: str, content: bytes, created_by_id: int | None = None) -> ContactImport:
    """Store an uploaded file with its header, a sample and a guessed mapping; ImportRefused says why not.

    Every row is read here, one at a time, so a file that breaks a limit, holds a NUL or cannot be decoded
    is refused now, naming the row and the column, rather than after its columns were mapped."""
    if not filename.lower().endswith((".csv", ".txt", ".xlsx", ".xlsm")):
        raise ImportRefused("Upload a .csv or .xlsx file.")
    check_file_size(len(content))
    limits = import_limits()
    try:
        encoding = "" if is_excel(filename) else detect_encoding(content)
        rows = read_rows(content, filename, limits, encoding=encoding)
        first = next(rows, None)
        if first is None:
            raise ImportRefused("The file is empty: its first row should name the columns (email, first name…).")
        header = first[1]
        sample, count = [], 0
        for _, cells in rows:
            if count < SAMPLE_ROWS:
                sample.append(_sample_cells(cells))
            count += 1
    except UnreadableFile as error:
        raise ImportRefused(str(error)) from None
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
        options={"existing": "update", "tag": "", "encoding": encoding},
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
    record.options = {
        "existing": existing,
        "tag": tag,
        "then": [_spec_dict(spec) for spec in then],
        "encoding": record.options.get("encoding", ""),  # as found at upload
    }
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
# The file is read twice, a chunk of rows at a time: once to check every row (nothing written), then, when
# no row has a problem, again to write them. Only what the check needs across chunks stays in memory (each
# email's first row, for duplicates), so a worker's memory does not grow with the rows' contents: holding
# every row of 200,000 as objects took 330 MiB.
ROW_CHUNK = 2000


@dataclass
class FileCheck:
    problems: list[RowProblem] = field(default_factory=list)
    new: int = 0  # contacts the import would create
    existing: int = 0  # rows whose email is a contact already in the account


@job_handler(IMPORT_HANDLER)
def run_import(payload: dict[str, Any], job: JobContext) -> None:
    record = ContactImport.objects.get(pk=payload["import_id"])
    record.status = ContactImport.Status.CHECKING
    record.save(update_fields=["status", "updated_at"])
    check = check_file(record)
    with transaction.atomic():
        if check.problems:
            _refuse(record, check.problems)
        elif payload.get("dry_run"):
            record.status = ContactImport.Status.CHECKED
            record.problems, record.problem_count = [], 0
            record.created_count, record.updated_count = check.new, check.existing
            record.save(update_fields=["status", "problems", "problem_count", "created_count", "updated_count"])
        else:
            with events.publishing_many():
                _write(record)
            then = [JobSpec(**spec) for spec in record.options.get("then", [])]
            job.mark_completed(then=then)
            return
        job.mark_completed()


def _row_chunks(record: ContactImport) -> Iterator[list[tuple[ImportedRow, list[RowProblem]]]]:
    """The file's rows under the header, read and checked one by one, ROW_CHUNK at a time (UnreadableFile
    when a limit lowered since the upload refuses one)."""
    rows = read_rows(
        bytes(record.content), record.filename, import_limits(), encoding=record.options.get("encoding", "")
    )
    next(rows, None)  # the header
    chunk: list[tuple[ImportedRow, list[RowProblem]]] = []
    for number, cells in rows:
        chunk.append(_checked_row(record, number, cells))
        if len(chunk) == ROW_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def check_file(record: ContactImport) -> FileCheck:
    """Every row read and checked, a chunk at a time; no write. A file the reader refuses (a limit lowered
    since its upload) is one problem, on the row it names."""
    check = FileCheck()
    duplicates = DuplicateEmails(_column(record, "email"))
    try:
        for chunk in _row_chunks(record):
            problems: list[RowProblem] = []
            for row, row_problems in chunk:
                problems.extend(row_problems)
                duplicate = duplicates.seen(row)
                if duplicate is not None:
                    problems.append(duplicate)
            rows = [row for row, _ in chunk]
            known = _known(record.account_id, rows)
            problems.extend(_tag_limit_problems(record, rows, known, refused={p.row for p in problems}))
            check.problems.extend(sorted(problems, key=lambda p: p.row))
            existing = sum(1 for row in rows if row.fields.get("email") in known)
            check.existing += existing
            check.new += len(rows) - existing
    except UnreadableFile as error:
        return FileCheck([RowProblem(error.row, "", str(error))])
    return check


def _checked_row(record: ContactImport, number: int, cells: list[str]) -> tuple[ImportedRow, list[RowProblem]]:
    row, problems = read_row(number, cells, record.header, record.mapping)
    if row.fields.get("email") and not problems:
        try:
            validate_email(row.fields["email"])
        except ValidationError:
            problems.append(RowProblem(number, _column(record, "email"), "is not a valid email address"))
    return row, problems


def _tag_limit_problems(
    record: ContactImport, rows: list[ImportedRow], known: Mapping[str, tuple[int, list[str]]], refused: set[int]
) -> list[RowProblem]:
    """Rows that would take their contact past MAX_TAGS: a new one by its own tags and the tag for everyone,
    one already here by the tags it has too (unless existing contacts are left as they are)."""
    everyone = record.options.get("tag") or ""
    skip_existing = record.options.get("existing") == "skip"
    column = _column(record, TAGS)
    problems = []
    for row in rows:
        email = row.fields.get("email", "")
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


def _write(record: ContactImport) -> None:
    """Every contact, in the caller's transaction, a chunk of rows at a time; the same events as one-by-one
    writes. The rows were checked (check_file) in this job: none has a problem."""
    account_id = record.account_id
    everyone_tag = record.options.get("tag") or ""
    skip_existing = record.options.get("existing") == "skip"
    ids: list[int] = []
    created = updated = skipped = 0
    for chunk in _row_chunks(record):
        rows = [row for row, _ in chunk]
        known = _known(account_id, rows)
        new: list[ImportedRow] = []
        for row in rows:
            email = row.fields.get("email")
            if email not in known:
                new.append(row)
            elif skip_existing:
                skipped += 1
            else:
                ids.append(_update(known[email][0], row, everyone_tag))
                updated += 1
        ids += _create(account_id, new, everyone_tag)
        created += len(new)
    record.status = ContactImport.Status.IMPORTED
    record.created_count, record.updated_count, record.skipped_count = created, updated, skipped
    record.contact_ids = ids
    record.problems, record.problem_count = [], 0
    record.content = b""  # the contacts are in; the file's personal data need not stay twice
    record.save()


def _update(contact_id: int, row: ImportedRow, everyone_tag: str) -> int:
    changes: dict[str, Any] = {k: v for k, v in row.fields.items() if v and k != "email"}
    if row.custom_fields:
        changes["custom_fields"] = row.custom_fields
    if changes:
        contact_update(contact_id=contact_id, fields=changes)
    for tag in [*row.tags, *([everyone_tag] if everyone_tag else [])]:
        contact_add_tag(contact_id=contact_id, tag=tag)
    return contact_id


def _create(account_id: int, rows: list[ImportedRow], everyone_tag: str) -> list[int]:
    contacts = [
        Contact(
            account_id=account_id,
            email=row.fields.get("email", ""),
            phone=row.fields.get("phone", ""),
            first_name=row.fields.get("first_name", ""),
            last_name=row.fields.get("last_name", ""),
            time_zone=row.fields.get("time_zone", ""),
            custom_fields=row.custom_fields,
            tags=list(dict.fromkeys([*row.tags, *([everyone_tag] if everyone_tag else [])])),
        )
        for row in rows
    ]
    Contact.objects.bulk_create(contacts)
    if any(c.pk is None for c in contacts):  # a backend that does not return ids (none we support)
        raise RuntimeError("bulk_create returned no ids")
    for contact in contacts:
        events.publish(events.ContactEvent(account_id, contact.pk, events.CONTACT_CREATED, {}))
        for tag in contact.tags:
            events.publish(events.ContactEvent(account_id, contact.pk, events.TAG_ADDED, {"tag": tag}))
    return [contact.pk for contact in contacts]


def import_options_label(options: Mapping[str, Any]) -> str:
    return "update contacts already here" if options.get("existing") == "update" else "leave existing contacts"
