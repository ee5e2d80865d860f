"""Reading an uploaded CSV or XLSX file as rows of text, within limits, one row at a time.

A file from a marketer's laptop is data we do not control: its encoding is whatever the program that saved
it chose, and its size and shape are whatever it is. What this module promises its callers:

- Text is decoded from what the file says it is: a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32), else
  UTF-8 when every byte of the file is valid UTF-8, else UTF-16 without a mark when its NUL bytes fall
  every other byte (ASCII text saved as UTF-16), else Windows-1252 (what Excel's plain "CSV" saves on a
  Western Windows) when the file has no NUL byte and every byte decodes. Anything else is refused: Latin-1
  would "decode" any bytes at all, a UTF-16 file's included, into text full of NULs.
- No row yields a NUL character (PostgreSQL's text and jsonb refuse it), more columns than the limit, or a
  cell longer than the limit; each is refused naming its row (as a spreadsheet numbers it) and column.
- Rows stream: the file's bytes are read once, a row at a time, never decoded whole; the header and every
  row are checked as they come, so a refusal costs no more than the rows read before it.
"""

from __future__ import annotations

import codecs
import csv
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

UTF8 = "utf-8"
UTF8_BOM = "utf-8-sig"
UTF16 = "utf-16"  # with its byte-order mark, which the codec reads
UTF32 = "utf-32"
UTF16_LE, UTF16_BE = "utf-16-le", "utf-16-be"  # no mark: told from where the NUL bytes fall
WINDOWS_1252 = "cp1252"
ENCODING_NAMES = {
    UTF8: "UTF-8",
    UTF8_BOM: "UTF-8 (with a byte-order mark)",
    UTF16: "UTF-16",
    UTF32: "UTF-32",
    UTF16_LE: "UTF-16 LE",
    UTF16_BE: "UTF-16 BE",
    WINDOWS_1252: "Windows-1252 (not UTF-8: check accented letters in the sample)",
}
_BOMS = (  # UTF-32 LE's mark starts like UTF-16 LE's: looked at first
    (codecs.BOM_UTF32_LE, UTF32),
    (codecs.BOM_UTF32_BE, UTF32),
    (codecs.BOM_UTF8, UTF8_BOM),
    (codecs.BOM_UTF16_LE, UTF16),
    (codecs.BOM_UTF16_BE, UTF16),
)
CSV_DELIMITERS = (",", ";", "\t")
EXCEL_MAX_ROWS = 1_048_576  # a sheet claiming a row past Excel's last is not a sheet Excel wrote
_CHUNK = 1 << 20
SAVE_AS_UTF8 = "save it again as “CSV UTF-8” (Excel: File, Save As) and upload that"


class UnreadableFile(ValueError):
    """The file cannot be read as contacts within the limits; the message says why, in plain words, and
    `row` is the row it names (0: the file as a whole)."""

    def __init__(self, message: str, row: int = 0) -> None:
        super().__init__(message)
        self.row = row


@dataclass(frozen=True)
class SheetLimits:
    max_bytes: int  # of the file as uploaded (an XLSX may unpack to MAX_UNPACKED_RATIO times this)
    max_columns: int
    max_rows: int  # rows under the header
    max_cell_chars: int


# --- encodings ---------------------------------------------------------------------------------
def detect_encoding(content: bytes) -> str:
    """The encoding a CSV file is in (see the module's docstring); UnreadableFile when it is none we read."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            _must_decode(content, encoding)
            return encoding
    has_nul = b"\x00" in content
    if has_nul:  # before UTF-8: ASCII saved as UTF-16 is valid UTF-8, a NUL every other byte
        encoding = _utf16_without_bom(content)
        if encoding and _decodes(content, encoding):
            return encoding
    if _decodes(content, UTF8):
        return UTF8  # a NUL in it is refused with its row and column
    if has_nul:
        raise UnreadableFile(
            "The file has NUL bytes and is not UTF-8 or UTF-16 text (a spreadsheet saved in another format?): "
            f"{SAVE_AS_UTF8}."
        )
    if _decodes(content, WINDOWS_1252):
        return WINDOWS_1252
    raise UnreadableFile(f"The file is not UTF-8, UTF-16 or Windows-1252 text: {SAVE_AS_UTF8}.")


def _utf16_without_bom(content: bytes) -> str:
    """UTF-16 LE or BE when the NUL bytes of the first kilobytes fall every other byte, as ASCII text's do."""
    head = content[:4096]
    pairs = len(head) // 2
    if pairs < 2:
        return ""
    even, odd = head[0 : 2 * pairs : 2].count(0), head[1 : 2 * pairs : 2].count(0)
    if odd >= pairs // 2 and even == 0:
        return UTF16_LE
    if even >= pairs // 2 and odd == 0:
        return UTF16_BE
    return ""


def _decodes(content: bytes, encoding: str) -> bool:
    try:
        _must_decode(content, encoding)
    except UnreadableFile:
        return False
    return True


def _must_decode(content: bytes, encoding: str) -> None:
    """Decode the whole file in chunks, keeping none of the text: whether it is valid in `encoding`; the
    refusal names the first byte that is not (counted from 1)."""
    decoder = codecs.getincrementaldecoder(encoding)()
    fed = 0
    try:
        for fed in range(0, len(content), _CHUNK):
            decoder.decode(content[fed : fed + _CHUNK])
        fed = len(content)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        # The decoder reports the position in what it held (bytes kept from the last chunk) plus this chunk.
        held = len(error.object) - (min(_CHUNK, len(content) - fed) if fed < len(content) else 0)
        position = fed - held + error.start
        raise UnreadableFile(
            f"The file says it is {ENCODING_NAMES.get(encoding, encoding)} but byte {position + 1:,} is not: "
            f"{SAVE_AS_UTF8}."
        ) from None


# --- rows --------------------------------------------------------------------------------------
def is_excel(filename: str) -> bool:
    return filename.lower().endswith((".xlsx", ".xlsm"))


def read_rows(
    content: bytes, filename: str, limits: SheetLimits, *, encoding: str = ""
) -> Iterator[tuple[int, list[str]]]:
    """(row number as a spreadsheet shows it, its cells) for every row that is not empty, the header first.

    Each row's trailing empty cells are dropped. UnreadableFile names the first row that breaks a limit,
    holds a NUL, or cannot be read; no more than `limits.max_rows` rows follow the header."""
    rows = _xlsx_rows(content, limits) if is_excel(filename) else _csv_rows(content, limits, encoding)
    header: list[str] | None = None
    count = 0
    for number, cells in rows:
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        _check_row(number, cells, header, limits)
        if header is None:
            header = cells
        else:
            count += 1
            if count > limits.max_rows:
                raise UnreadableFile(
                    f"The file has more than {limits.max_rows:,} contacts (the most one import takes): "
                    "split it in parts."
                )
        yield number, cells


def _check_row(number: int, cells: list[str], header: list[str] | None, limits: SheetLimits) -> None:
    if len(cells) > limits.max_columns:
        raise UnreadableFile(
            f"Row {number} has more than {limits.max_columns:,} columns, the most a file may have: remove the "
            "columns you do not need, or split the file.",
            number,
        )
    for index, cell in enumerate(cells):
        if "\x00" in cell:
            raise UnreadableFile(
                f"Row {number}, {column_name(index, header)} contains a NUL character (a zero byte), which cannot "
                "be stored: remove it, or save the file again as “CSV UTF-8”.",
                number,
            )
        if len(cell) > limits.max_cell_chars:
            raise UnreadableFile(
                f"Row {number}, {column_name(index, header)} holds {len(cell):,} characters; a cell may hold at "
                f"most {limits.max_cell_chars:,}.",
                number,
            )


def column_name(index: int, header: list[str] | None) -> str:
    """`column 3 (“Email”)` once the header is known, else `column 3`."""
    label = header[index] if header and index < len(header) and header[index] else ""
    return f"column {index + 1} (“{label[:60]}”)" if label else f"column {index + 1}"


# --- CSV ---------------------------------------------------------------------------------------
def _csv_rows(content: bytes, limits: SheetLimits, encoding: str) -> Iterator[tuple[int, list[str]]]:
    encoding = encoding or detect_encoding(content)
    if limits.max_cell_chars >= csv.field_size_limit():
        csv.field_size_limit(limits.max_cell_chars + 1)  # the reader's own limit must not be the one that bites
    head = io.TextIOWrapper(io.BytesIO(content[: 256 * 1024]), encoding=encoding, errors="replace", newline="")
    dialect = _dialect(head.read(64 * 1024))
    text = io.TextIOWrapper(io.BytesIO(content), encoding=encoding, newline="")
    # No physical line of a file within the limits is longer than this: a longer one is refused before the
    # csv module makes a list of its million cells.
    longest = limits.max_columns * (limits.max_cell_chars + 3) + 2
    reader = csv.reader(_bounded_lines(text, longest), dialect)
    number = 0
    try:
        for number, row in enumerate(reader, start=1):
            yield number, [cell.strip() for cell in row]
    except csv.Error as error:
        if "field larger than field limit" in str(error):
            raise UnreadableFile(
                f"Row {number + 1} has a cell longer than {limits.max_cell_chars:,} characters, the most a cell "
                "may hold.",
                number + 1,
            ) from None
        raise UnreadableFile(f"Row {number + 1} cannot be read as CSV ({error}).", number + 1) from None
    except UnicodeDecodeError:
        name = ENCODING_NAMES.get(encoding, encoding)
        raise UnreadableFile(f"Row {number + 1} is not {name} text: {SAVE_AS_UTF8}.", number + 1) from None


def _bounded_lines(text: io.TextIOWrapper, longest: int) -> Iterator[str]:
    for number, line in enumerate(text, start=1):
        if len(line) > longest:
            raise UnreadableFile(
                f"Line {number:,} of the file is {len(line):,} characters long: more than its columns and cells "
                "can hold within the limits."
            )
        yield line


def _dialect(sample: str) -> type[csv.Dialect]:
    """Excel's CSV with the delimiter its first line uses most, outside quotes (`,` when none is used).

    csv.Sniffer would also guess quoting, but it takes time quadratic in the sample on some inputs (seconds
    on 20 KB of quotes and semicolons), and every spreadsheet program writes Excel's quoting."""
    first = sample.split("\n", 1)[0]
    counts = dict.fromkeys(CSV_DELIMITERS, 0)
    quoted = False
    for char in first:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    delimiter = max(CSV_DELIMITERS, key=lambda d: (counts[d], d == ","))
    if delimiter == ",":
        return csv.excel
    return type("Delimited", (csv.excel,), {"delimiter": delimiter})


# --- XLSX --------------------------------------------------------------------------------------
def _xlsx_rows(content: bytes, limits: SheetLimits) -> Iterator[tuple[int, list[str]]]:
    from openpyxl import load_workbook

    _check_unpacked_size(content, limits.max_bytes)
    try:
        book = load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    except Exception:
        raise UnreadableFile("This is not an Excel file Relay can read (save it as .xlsx or .csv).") from None
    number = 0
    try:
        if not book.worksheets:
            raise UnreadableFile("The Excel file has no sheet.")
        sheet = book.worksheets[0]
        # One column past the limit is read, so a header that breaks it is seen; cells further right are not
        # made at all (a sheet may claim a cell in column 16,384 or beyond on every row), and no row past
        # Excel's last is filled in.
        rows = sheet.iter_rows(max_col=limits.max_columns + 1, max_row=EXCEL_MAX_ROWS, values_only=True)
        for number, values in enumerate(rows, start=1):
            yield number, [_cell(v) for v in values]
    except UnreadableFile:
        raise
    except Exception as error:  # openpyxl's XML parser: a cell holding a NUL or another control character
        raise UnreadableFile(
            f"Row {number + 1} of the Excel file cannot be read ({type(error).__name__}: a cell may hold a "
            "character Excel files cannot, such as a NUL): save it again from Excel, or as “CSV UTF-8”.",
            number + 1,
        ) from None
    finally:
        book.close()


MAX_UNPACKED_RATIO = 8


def _check_unpacked_size(content: bytes, max_bytes: int) -> None:
    """An XLSX is a zip: one of a few megabytes can unpack to gigabytes. Its parts together may be at most
    MAX_UNPACKED_RATIO times the size the upload limit allows a file (a sheet's XML takes about five times
    the CSV of the same rows)."""
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except zipfile.BadZipFile:
        raise UnreadableFile("This is not an Excel file Relay can read (save it as .xlsx or .csv).") from None
    allowed = MAX_UNPACKED_RATIO * max_bytes
    if unpacked > allowed:
        raise UnreadableFile(
            f"This Excel file unpacks to {file_size(unpacked)}; Relay reads at most {file_size(allowed)} of one: "
            "save it as CSV, or split it in parts."
        )


def file_size(size: int) -> str:
    """1,234 bytes as `1 KB`, 52,428,800 as `50 MB`."""
    return f"{size / (1024 * 1024):,.0f} MB" if size >= 1024 * 1024 else f"{size / 1024:,.0f} KB"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 15550100000.0 is a phone number, not a float
    return str(value).strip()
