"""Exporting contacts: a file of every contact in a list, and its record in the audit log.

An export hands every contact's data over to whoever downloads it, out of reach of Relay's roles: the caller
passes only contacts of accounts where the user may export (`Permission.EXPORT_CONTACTS`: not a viewer's),
and each export is recorded before the file is written, one audit event per account it holds (who, when,
how many contacts, which format). The rows are counted as the export starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import Count, QuerySet

from accounts.application.audit import audit_record
from accounts.domain.audit import AuditAction
from contacts.domain.exports import EXPORT_COLUMNS, Cell, ExportFormat, export_row
from contacts.infrastructure.exports import CSV_CONTENT_TYPE, XLSX_CONTENT_TYPE, csv_lines, xlsx_bytes
from contacts.infrastructure.models import Contact


@dataclass(frozen=True)
class ContactExport:
    filename: str
    content_type: str
    content: Iterator[str] | bytes  # CSV: its lines, to stream; XLSX: the workbook
    rows: int


def contacts_export(
    *, contacts: QuerySet[Contact], export_format: ExportFormat, actor_id: int | None, via: str
) -> ContactExport:
    """The file of `contacts` in `export_format`, audited first (`via` says from where: "list", "selection")."""
    per_account = dict(contacts.order_by().values_list("account_id").annotate(rows=Count("pk")))
    details = {
        account_id: {"rows": rows, "format": str(export_format), "via": via} for account_id, rows in per_account.items()
    }
    audit_record(action=AuditAction.CONTACTS_EXPORTED, actor_id=actor_id, details=details)
    rows = sum(per_account.values())
    if export_format is ExportFormat.XLSX:
        return ContactExport("contacts.xlsx", XLSX_CONTENT_TYPE, xlsx_bytes(EXPORT_COLUMNS, _rows(contacts)), rows)
    return ContactExport("contacts.csv", CSV_CONTENT_TYPE, csv_lines(EXPORT_COLUMNS, _rows(contacts)), rows)


def _rows(contacts: QuerySet[Contact]) -> Iterator[list[Cell]]:
    for contact in contacts.order_by("pk").values(*EXPORT_COLUMNS).iterator(chunk_size=2000):
        yield export_row(contact)
