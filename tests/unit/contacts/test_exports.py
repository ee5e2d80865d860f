"""The export's one rule: no cell is a formula (CSV: OWASP's leading quote; XLSX: string cells)."""

import pytest

from contacts.domain.exports import EXPORT_COLUMNS, csv_cell, export_row, is_formula_like, xlsx_text


@pytest.mark.parametrize(
    "text",
    ["=cmd|' /C calc'!A0", "+1+1", "-2+3", '@HYPERLINK("https://evil.example","x")', "\t=1+1", "\r=1+1", "\0x"],
)
def test_a_formula_like_cell_is_text_in_csv(text):
    assert is_formula_like(text)
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["Ada", " =1", "'=1", "a=b", "", "1.5", "ünïcode", 7, 3.5, True])
def test_other_cells_are_written_as_they_are(value):
    assert csv_cell(value) == str(value)
    assert not is_formula_like(str(value))


def test_a_phone_number_is_text_too():
    assert csv_cell("+15550100000") == "'+15550100000"


def test_none_is_an_empty_cell():
    assert csv_cell(None) == ""


def test_xlsx_text_keeps_everything_xml_can_hold():
    assert xlsx_text("a\tb\nc\r=d é 😀") == "a\tb\nc\r=d é 😀"
    assert xlsx_text("bell\x07 nul\x00 esc\x1b") == "bell\ufffd nul\ufffd esc\ufffd"


def test_a_row_follows_the_columns():
    row = export_row({"id": 3, "email": "a@x.example", "tags": ["vip", "=x"], "unsubscribed": 1, "created_at": None})
    assert len(row) == len(EXPORT_COLUMNS)
    assert row == [3, "a@x.example", "", "", "", "vip, =x", True, False, ""]
