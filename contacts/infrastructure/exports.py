"""The contact export's two file formats, written row by row: CSV (streamed) and XLSX (openpyxl's write-only
mode keeps memory flat). Every cell goes through the rule of `contacts.domain.exports`: no cell is a formula."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence

from contacts.domain.exports import Cell, csv_cell, is_formula_like, xlsx_text

XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV_CONTENT_TYPE = "text/csv; charset=utf-8"


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    """The CSV's lines, one at a time (for a streaming response)."""
    writer = csv.writer(_Echo())
    yield writer.writerow([csv_cell(name) for name in header])
    for row in rows:
        yield writer.writerow([csv_cell(value) for value in row])


def xlsx_bytes(header: Sequence[str], rows: Iterable[Sequence[Cell]], *, title: str = "Contacts") -> bytes:
    """The workbook's bytes: texts as string cells (never formulas), numbers and booleans as themselves."""
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell

    book = Workbook(write_only=True)
    sheet = book.create_sheet(title)

    def cells(values: Sequence[Cell]) -> list[object]:
        out: list[object] = []
        for value in values:
            if isinstance(value, str):
                cell = WriteOnlyCell(sheet, value=xlsx_text(value))
                cell.data_type = "s"  # openpyxl makes any text starting with "=" a formula: this one is text
                if is_formula_like(value):
                    cell.quotePrefix = True  # and stays text when someone edits it in Excel
                out.append(cell)
            else:
                out.append(value)
        return out

    sheet.append(cells(list(header)))
    for row in rows:
        sheet.append(cells(row))
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()
