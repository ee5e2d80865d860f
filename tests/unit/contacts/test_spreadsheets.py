"""Reading an uploaded file's bytes as rows (contacts/infrastructure/spreadsheets.py): which encoding, which
delimiter, and the limits, without a database."""

from __future__ import annotations

import codecs

import pytest

from contacts.infrastructure.spreadsheets import (
    UTF8,
    UTF8_BOM,
    UTF16,
    UTF16_BE,
    UTF16_LE,
    UTF32,
    WINDOWS_1252,
    SheetLimits,
    UnreadableFile,
    _dialect,
    detect_encoding,
    read_rows,
)

TEXT = "email;name\nzoe@example.com;Zoë Ærø\n"
LIMITS = SheetLimits(max_bytes=1 << 20, max_columns=5, max_rows=10, max_cell_chars=20)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (TEXT.encode("utf-8"), UTF8),
        (TEXT.encode("utf-8-sig"), UTF8_BOM),
        (TEXT.encode("utf-16"), UTF16),
        (codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"), UTF16),
        (TEXT.encode("utf-32"), UTF32),
        (TEXT.encode("utf-16-le"), UTF16_LE),
        (TEXT.encode("utf-16-be"), UTF16_BE),
        (TEXT.encode("cp1252"), WINDOWS_1252),
        (b"email\nada@example.com\n", UTF8),  # ASCII is UTF-8
        (b"email,note\nada@example.com,a\x00b\n", UTF8),  # a NUL in UTF-8: refused later, by row
    ],
)
def test_the_encoding_is_told_from_the_bytes(content, expected):
    assert detect_encoding(content) == expected


def test_the_rows_of_each_encoding_read_the_same():
    for encoding in ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "cp1252"):
        rows = list(read_rows(TEXT.encode(encoding), "people.csv", LIMITS))
        assert rows == [(1, ["email", "name"]), (2, ["zoe@example.com", "Zoë Ærø"])], encoding


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01\x02\xff\xfe\x00\x10", "The file has NUL bytes and is not UTF-8 or UTF-16 text"),
        (b"email\nzo\x81@example.com\n", "The file is not UTF-8, UTF-16 or Windows-1252 text"),  # 0x81: no cp1252
        (codecs.BOM_UTF16_LE + b"a\x00\x00\xd8", "The file says it is UTF-16 but byte 5 is not"),  # lone surrogate
    ],
)
def test_bytes_in_no_encoding_relay_reads_are_refused(content, message):
    with pytest.raises(UnreadableFile) as caught:
        detect_encoding(content)
    assert str(caught.value).startswith(message)


def test_latin1_is_not_a_fallback_that_reads_anything():
    """Latin-1 maps every byte to a character: UTF-16 read as Latin-1 is text full of NULs (the old 500)."""
    content = "email\r\nada@example.com\r\n".encode("utf-16-le")
    assert detect_encoding(content) == UTF16_LE
    assert list(read_rows(content, "list.csv", LIMITS)) == [(1, ["email"]), (2, ["ada@example.com"])]


@pytest.mark.parametrize(
    ("first_line", "delimiter"),
    [
        ("email,name,city", ","),
        ("email;name;city", ";"),
        ("email\tname\tcity", "\t"),
        ('"last, first";email;phone', ";"),  # the comma is inside quotes
        ("email", ","),
    ],
)
def test_the_delimiter_is_the_one_the_header_uses_most(first_line, delimiter):
    assert _dialect(first_line + "\nx\n").delimiter == delimiter


def test_each_limit_names_the_row_and_the_column():
    def error(content: bytes) -> str:
        with pytest.raises(UnreadableFile) as caught:
            list(read_rows(content, "list.csv", LIMITS))
        return f"{caught.value.row}: {caught.value}"

    assert error(b"a,b,c,d,e,f\n").startswith("1: Row 1 has more than 5 columns")
    assert error(b"email,note\nada@example.com," + b"x" * 21 + b"\n") == (
        "2: Row 2, column 2 (“note”) holds 21 characters; a cell may hold at most 20."
    )
    assert error(b"email,no\x00te\n").startswith("1: Row 1, column 2 contains a NUL character")
    assert error(b"email\n" + b"a@b.co\n" * 11).startswith("0: The file has more than 10 contacts")
    # A physical line longer than any row within the limits could be: refused before csv splits it.
    assert error(b"email\n" + b"," * 200).startswith("0: Line 2 of the file is 200 characters long")


def test_empty_rows_and_trailing_empty_cells_are_skipped_but_counted():
    content = b"email,name,,\n\n,,\nada@example.com,Ada,,\n"
    assert list(read_rows(content, "list.csv", LIMITS)) == [(1, ["email", "name"]), (4, ["ada@example.com", "Ada"])]
