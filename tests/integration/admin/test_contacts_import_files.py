"""Real files at the import's door (issue 21, item 4): encodings, NULs, limits, and a mapping page that stays
linear in the number of columns. Each refusal is an error on the upload form naming the row, the column or
the limit; nothing is stored, and nothing answers 500 (as NULs and UTF-16 did on PostgreSQL, and a cell
over 128 KiB did everywhere)."""

from __future__ import annotations

import codecs
import csv
import io
import sys
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from contacts.infrastructure.models import Contact, ContactImport
from tests.factories import MembershipFactory, UserFactory
from tests.integration.workflows.support import run_due_jobs
from workflows.admin_roles import grant_role

pytestmark = pytest.mark.django_db(transaction=True)  # the import runs as a job


@pytest.fixture
def marketer(client, account):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    client.force_login(user)
    return client


def post_file(client, account, name: str, content: bytes):
    return client.post(
        reverse("admin:contacts_contact_import"), {"account": account.pk, "file": SimpleUploadedFile(name, content)}
    )


def refusal(client, account, name: str, content: bytes) -> str:
    """The upload is refused on its form (200, the form again) and nothing is stored; the error's text."""
    response = post_file(client, account, name, content)
    assert response.status_code == 200, response.status_code
    assert not ContactImport.objects.exists()
    errors = response.context["form"].errors["file"]
    assert len(errors) == 1, errors
    return errors[0]


def import_file(client, account, name: str, content: bytes) -> ContactImport:
    response = post_file(client, account, name, content)
    assert response.status_code == 302, response.context["form"].errors if response.context else response
    record = ContactImport.objects.latest("pk")
    data = {f"column_{i}": target for i, target in enumerate(record.mapping)}
    response = client.post(
        reverse("admin:contacts_contact_import_detail", args=[record.pk]),
        {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", **data},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run_due_jobs()
    record.refresh_from_db()
    return record


def csv_bytes(rows: list[list[str]], encoding: str = "utf-8", delimiter: str = ",") -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter).writerows(rows)
    return buffer.getvalue().encode(encoding)


def xlsx_bytes(rows: list[list[str]]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.worksheets[0]
    for row in rows:
        sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def with_sheet_xml(content: bytes, old: bytes, new: bytes) -> bytes:
    """The XLSX with one text of its sheet's XML replaced: what no spreadsheet program writes."""
    source = zipfile.ZipFile(io.BytesIO(content))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                assert old in data
                data = data.replace(old, new)
            target.writestr(info.filename, data)
    return out.getvalue()


PEOPLE = [["Email", "First name", "City"], ["zoe@example.com", "Zoë", "Zürich"], ["bo@example.com", "Bo", "Åre"]]


# --- encodings ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "delimiter", "shown"),
    [
        ("utf-8", ",", "UTF-8"),
        ("utf-8-sig", ";", "UTF-8 (with a byte-order mark)"),
        ("utf-16", "\t", "UTF-16"),  # Excel's "Unicode Text": UTF-16 LE with its mark, tab-separated
        ("utf-16-be-bom", ",", "UTF-16"),
        ("utf-16-le", ",", "UTF-16 LE"),  # no mark: told from where the NUL bytes fall
        ("cp1252", ";", "Windows-1252"),  # Excel's plain "CSV" on a Western Windows
    ],
)
def test_a_file_is_read_in_the_encoding_it_is_in(marketer, account, encoding, delimiter, shown):
    if encoding == "utf-16-be-bom":
        content = codecs.BOM_UTF16_BE + csv_bytes(PEOPLE, "utf-16-be", delimiter)
    else:
        content = csv_bytes(PEOPLE, encoding, delimiter)
    record = import_file(marketer, account, "people.csv", content)
    assert record.header == ["Email", "First name", "City"]
    assert record.status == "imported", record.problems
    zoe = Contact.objects.get(account=account, email="zoe@example.com")
    assert (zoe.first_name, zoe.custom_fields) == ("Zoë", {"city": "Zürich"})
    page = marketer.get(reverse("admin:contacts_contact_import_detail", args=[record.pk])).content.decode()
    assert f"read as {shown}" in page


def test_a_file_with_nul_bytes_in_no_encoding_relay_reads_is_refused(marketer, account):
    content = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + bytes(range(256))
    error = refusal(marketer, account, "photo.csv", content)
    assert error.startswith("The file has NUL bytes and is not UTF-8 or UTF-16 text")
    assert "CSV UTF-8" in error


def test_a_mark_that_lies_is_refused_naming_the_byte(marketer, account):
    content = codecs.BOM_UTF8 + "email\nzoë@example.com\n".encode("latin-1")
    assert refusal(marketer, account, "list.csv", content) == (
        "The file says it is UTF-8 (with a byte-order mark) but byte 12 is not: save it again as “CSV UTF-8” "
        "(Excel: File, Save As) and upload that."
    )


# --- NUL characters ----------------------------------------------------------------------------
def test_a_nul_in_the_header_is_refused_naming_its_row_and_column(marketer, account):
    content = b"email,first\x00name\nada@example.com,Ada\n"
    assert refusal(marketer, account, "list.csv", content).startswith(
        "Row 1, column 2 contains a NUL character (a zero byte), which cannot be stored"
    )


def test_a_nul_in_a_cell_is_refused_naming_its_row_and_column(marketer, account):
    content = b"email,first name\nada@example.com,Ada\n\nbob@example.com,B\x00b\n"
    # Row 4 as a spreadsheet shows it: the blank line is row 3.
    assert refusal(marketer, account, "list.csv", content).startswith(
        "Row 4, column 2 (“first name”) contains a NUL character"
    )


def test_a_nul_in_a_utf16_file_is_refused_naming_its_row_and_column(marketer, account):
    content = "email\tnote\nada@example.com\tfine\nbob@example.com\tba\x00d\n".encode("utf-16")
    assert refusal(marketer, account, "list.txt", content).startswith(
        "Row 3, column 2 (“note”) contains a NUL character"
    )


@pytest.mark.parametrize("nul", [b"&#0;", b"\x00"])
def test_an_excel_file_holding_a_nul_is_refused_not_a_500(marketer, account, nul):
    """openpyxl's XML parser refuses a NUL where Excel would never write one; the refusal names the row."""
    content = with_sheet_xml(xlsx_bytes(PEOPLE), b"<t>Bo</t>", b"<t>B" + nul + b"o</t>")
    error = refusal(marketer, account, "people.xlsx", content)
    assert error.startswith("Row 3 of the Excel file cannot be read (ParseError")
    assert "such as a NUL" in error


def test_the_blank_rows_of_a_file_count_as_a_spreadsheet_counts_them(marketer, account):
    content = b"email,first name\n\nada@example.com,Ada\nnot-an-email,Bob\n"
    record = import_file(marketer, account, "list.csv", content)
    assert record.status == "refused"
    assert [(p["row"], p["column"]) for p in record.problems] == [(4, "email")]


# --- limits ------------------------------------------------------------------------------------
def test_the_file_size_limit(marketer, account, settings):
    settings.CONTACT_IMPORT_MAX_BYTES = 2048
    content = csv_bytes([["email"], *([f"c{i}@example.com"] for i in range(200))])
    assert refusal(marketer, account, "list.csv", content) == (
        f"The file is {len(content) / 1024:,.0f} KB; a file may be at most 2 KB: split it in parts."
    )


def test_the_column_limit_by_default_and_set(marketer, account, settings):
    wide = [["Email", *(f"Field {i}" for i in range(200))], ["ada@example.com", *("x" * 200)]]
    assert refusal(marketer, account, "wide.csv", csv_bytes(wide)) == (
        "Row 1 has more than 200 columns, the most a file may have: remove the columns you do not need, "
        "or split the file."
    )
    assert refusal(marketer, account, "wide.xlsx", xlsx_bytes(wide)).startswith("Row 1 has more than 200 columns")
    settings.CONTACT_IMPORT_MAX_COLUMNS = 3
    rows = [["email", "a", "b"], ["ada@example.com", "1", "2", "3"]]  # a row wider than the header
    assert refusal(marketer, account, "list.csv", csv_bytes(rows)).startswith("Row 2 has more than 3 columns")
    trailing = [["email", "a", "b", "", ""], ["ada@example.com", "1", "2", "", "", ""]]  # empty cells do not count
    assert import_file(marketer, account, "list.csv", csv_bytes(trailing)).status == "imported"


def test_the_row_limit(marketer, account, settings):
    settings.CONTACT_IMPORT_MAX_ROWS = 3
    rows = [["email"], *([f"c{i}@example.com"] for i in range(4))]
    assert refusal(marketer, account, "list.csv", csv_bytes(rows)) == (
        "The file has more than 3 contacts (the most one import takes): split it in parts."
    )
    assert refusal(marketer, account, "list.xlsx", xlsx_bytes(rows)).startswith("The file has more than 3 contacts")
    assert import_file(marketer, account, "list.csv", csv_bytes(rows[:4])).status == "imported"


def test_a_cell_over_the_csv_modules_own_limit_is_refused_naming_the_limit(marketer, account):
    """Python's csv refuses a field over 128 KiB with `_csv.Error`: that was a 500."""
    content = b'email,notes\nada@example.com,"' + b"x" * 140_000 + b'"\n'
    assert refusal(marketer, account, "list.csv", content) == (
        "Row 2 has a cell longer than 10,000 characters, the most a cell may hold."
    )


def test_the_cell_limit(marketer, account, settings):
    settings.CONTACT_IMPORT_MAX_CELL_CHARS = 50
    rows = [["email", "notes"], ["ada@example.com", "y" * 51]]
    expected = "Row 2, column 2 (“notes”) holds 51 characters; a cell may hold at most 50."
    assert refusal(marketer, account, "list.csv", csv_bytes(rows)) == expected
    assert refusal(marketer, account, "list.xlsx", xlsx_bytes(rows)) == expected
    rows[1][1] = "y" * 50
    assert import_file(marketer, account, "list.csv", csv_bytes(rows)).status == "imported"


def test_a_limit_lowered_after_the_upload_refuses_the_import_on_the_row_it_names(marketer, account, settings):
    rows = [["email", "notes"], ["ada@example.com", "short"], ["bob@example.com", "y" * 80]]
    response = post_file(marketer, account, "list.csv", csv_bytes(rows))
    assert response.status_code == 302
    settings.CONTACT_IMPORT_MAX_CELL_CHARS = 50
    record = ContactImport.objects.get()
    marketer.post(
        reverse("admin:contacts_contact_import_detail", args=[record.pk]),
        {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", "column_0": "email", "column_1": ""},
    )
    run_due_jobs()
    record.refresh_from_db()
    assert record.status == "refused"
    assert record.problems == [
        {
            "row": 3,
            "column": "",
            "message": "Row 3, column 2 (“notes”) holds 80 characters; a cell may hold at most 50.",
        }
    ]
    assert not Contact.objects.exists()


def test_an_excel_file_that_unpacks_far_past_the_size_limit_is_refused(marketer, account, settings):
    settings.CONTACT_IMPORT_MAX_BYTES = 20_000
    content = with_sheet_xml(xlsx_bytes(PEOPLE), b"<t>Bo</t>", b"<t>B" + b"o" * 200_000 + b"</t>")
    assert len(content) < 20_000  # it compresses to almost nothing
    error = refusal(marketer, account, "people.xlsx", content)
    assert error.startswith("This Excel file unpacks to 2")  # 200 KB of text and the rest of the workbook
    assert error.endswith(" KB; Relay reads at most 156 KB of one: save it as CSV, or split it in parts.")


# --- the mapping page --------------------------------------------------------------------------
def _calls_to_render_mapping_page(client, account, columns: int) -> int:
    """Python function calls made while the mapping page of a file of `columns` columns renders: a count of
    the work done that no machine's speed changes."""
    header = ["Email", *(f"Field {i}" for i in range(columns - 1))]
    rows = [header, *([f"c{r}@example.com", *(f"v{r}.{c}" for c in range(columns - 1))] for r in range(8))]
    response = post_file(client, account, "wide.csv", csv_bytes(rows))
    assert response.status_code == 302
    url = response["Location"]
    client.get(url)  # templates compiled and cached once
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        response = client.get(url)
    finally:
        sys.setprofile(None)
    assert response.status_code == 200
    assert response.content.decode().count('<select name="column_') == columns
    return calls


def test_the_mapping_page_does_work_linear_in_the_columns(marketer, account):
    """It nested a loop over every cell of every sample row inside the loop over columns: 500 columns took 3 s,
    2,000 columns 38 s. Four times the columns must cost about four times the work, not sixteen."""
    small = _calls_to_render_mapping_page(marketer, account, 40)
    large = _calls_to_render_mapping_page(marketer, account, 160)
    print(f"calls: {small:,} for 40 columns, {large:,} for 160")
    assert large < 5 * small, (small, large)


# --- 200,000 rows ------------------------------------------------------------------------------
def test_an_import_asks_once_whether_the_account_has_waits_or_goals_not_once_per_event(marketer, account):
    """Each contact created publishes contact.created and a tag.added per tag, and the workflow engine asked
    the database, for each event, whether the account has runs that wait for events or goals: 600,000
    statements for 200,000 contacts with two tags, which took the import past its job's time limit."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    rows = [["email", "tags"], *([f"c{i}@example.com", "a, b"] for i in range(30))]
    response = post_file(marketer, account, "list.csv", csv_bytes(rows))
    record = ContactImport.objects.get()
    marketer.post(
        response["Location"],
        {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", "column_0": "email", "column_1": "tags"},
    )
    with CaptureQueriesContext(connection) as queries:
        run_due_jobs()
    record.refresh_from_db()
    assert (record.status, record.created_count) == ("imported", 30)
    asked = [q["sql"] for q in queries.captured_queries if '"listens"' in q["sql"]]
    assert len(asked) == 1, len(asked)  # 90 events


def test_the_file_is_read_a_chunk_of_rows_at_a_time_and_checked_across_chunks(marketer, account, monkeypatch):
    """Rows are not all held in memory: checked, then written, ROW_CHUNK at a time; a duplicate or a contact
    already here is found whichever chunk it is in."""
    from contacts.application import imports
    from contacts.application.services import contact_create

    monkeypatch.setattr(imports, "ROW_CHUNK", 2)
    contact_create(account_id=account.pk, email="here@example.com", first_name="Old")
    rows = [["email", "first name"], *([f"c{i}@example.com", f"C{i}"] for i in range(4))]
    rows += [["here@example.com", "New"], ["c0@example.com", "Again"]]
    record = import_file(marketer, account, "list.csv", csv_bytes(rows))
    assert record.status == "refused"
    assert record.problems == [{"row": 7, "column": "email", "message": "c0@example.com is also on row 2"}]
    assert Contact.objects.count() == 1
    record = import_file(marketer, account, "list.csv", csv_bytes(rows[:-1]))
    assert (record.status, record.created_count, record.updated_count) == ("imported", 4, 1)
    assert len(record.contact_ids) == 5
    assert Contact.objects.get(email="here@example.com").first_name == "New"
