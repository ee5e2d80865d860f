"""Contacts in lists: import a CSV or XLSX through the admin (preview, mapping, per-row problems, all or
nothing), optionally enrolling everyone into a workflow on the queue; export the filtered list."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from contacts.application.services import contact_create
from contacts.infrastructure.models import Contact, ContactImport
from tests.factories import MembershipFactory, UserFactory
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.admin_roles import grant_role
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)  # the import and the enrollment run as jobs


@pytest.fixture
def marketer(client, account):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    client.force_login(user)
    return client


def upload(client, account, name, content):
    response = client.post(
        reverse("admin:contacts_contact_import"), {"account": account.pk, "file": SimpleUploadedFile(name, content)}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return ContactImport.objects.latest("pk")


def mapping_post(record, **extra):
    data = {f"column_{i}": target for i, target in enumerate(record.mapping)}
    return {"existing": "update", "tag": "", "then_enroll": "", "_import": "1", **extra, **data}


def test_a_file_with_bad_rows_is_refused_whole_naming_each_problem(marketer, account):
    content = b"Email,First name,Phone,Tags\nada@example.com,Ada,+15550100001,vip\nnot-an-email,Bob,,\n"
    content += b"grace@example.com,Grace,call me,\nada@example.com,Ada again,,\n"
    record = upload(marketer, account, "list.csv", content)
    page = marketer.get(reverse("admin:contacts_contact_import_detail", args=[record.pk])).content.decode()
    assert "What is in each column?" in page
    assert record.mapping == ["email", "first_name", "phone", "tags"]  # guessed from the header
    marketer.post(reverse("admin:contacts_contact_import_detail", args=[record.pk]), mapping_post(record))
    run_due_jobs()
    record.refresh_from_db()
    assert record.status == "refused"
    assert [(p["row"], p["column"]) for p in record.problems] == [(3, "Email"), (4, "Phone"), (5, "Email")]
    assert "is also on row 2" in record.problems[2]["message"]
    assert not Contact.objects.filter(account=account).exists()
    page = marketer.get(reverse("admin:contacts_contact_import_detail", args=[record.pk])).content.decode()
    assert "nothing was imported" in page


def test_an_xlsx_imports_through_the_services_and_enrolls_everyone(marketer, account):
    from openpyxl import Workbook

    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "enrolled"}}], name="Onboarding")
    tagged = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "seen"}}],
        trigger={"type": "event", "event": "tag.added", "tag": "webinar"},
        name="Webinar follow-up",
    )
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    book = Workbook()
    sheet = book.active
    sheet.append(["E-mail", "Given name", "Plan type"])
    sheet.append(["ada@example.com", "Ada L.", "pro"])
    sheet.append(["grace@example.com", "Grace", "free"])
    buffer = io.BytesIO()
    book.save(buffer)
    record = upload(marketer, account, "list.xlsx", buffer.getvalue())
    assert record.mapping == ["email", "first_name", "custom:plan_type"]
    data = mapping_post(record, tag="webinar", then_enroll=str(workflow.pk))
    marketer.post(reverse("admin:contacts_contact_import_detail", args=[record.pk]), data)
    run_due_jobs(500)
    record.refresh_from_db()
    assert record.status == "imported", record.problems
    assert (record.created_count, record.updated_count) == (1, 1)
    ada = Contact.objects.get(account=account, email="ada@example.com")
    assert ada.first_name == "Ada L."
    assert ada.custom_fields == {"plan_type": "pro"}
    assert set(ada.tags) == {"webinar", "enrolled", "seen"}
    # tag.added started the tag-triggered workflow for both, as the API would; the import enrolled both.
    assert WorkflowExecution.objects.filter(workflow=tagged).count() == 2
    assert WorkflowExecution.objects.filter(workflow=workflow, status="completed").count() == 2
    assert "Enrolled 2 contacts into “Onboarding”" in record.follow_up


def test_enrollment_waits_for_room_under_the_accounts_limit(marketer, account):
    account.max_concurrent_executions = 2
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [{"action_type": "wait", "config": {"duration": "1h"}}], name="Slow")
    rows = "\n".join(f"c{i}@example.com" for i in range(5))
    record = upload(marketer, account, "list.csv", f"email\n{rows}\n".encode())
    marketer.post(
        reverse("admin:contacts_contact_import_detail", args=[record.pk]),
        mapping_post(record, then_enroll=str(workflow.pk)),
    )
    run_due_jobs(50)
    record.refresh_from_db()
    assert record.status == "imported"
    # Two fit under the limit (the waits leave QUEUED/ACTIVE for WAITING, so room comes back as they run).
    assert WorkflowExecution.objects.filter(workflow=workflow).count() >= 2
    assert "Enrolling into “Slow”" in record.follow_up or "Enrolled 5" in record.follow_up


def test_export_the_filtered_list(marketer, account):
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="", tags=["vip"])
    contact_create(account_id=account.pk, email="bob@example.com", first_name="Bob", phone="")
    response = marketer.get(reverse("admin:contacts_contact_export") + "?tag=vip")
    body = b"".join(response.streaming_content).decode()
    assert "ada@example.com" in body
    assert "bob@example.com" not in body


def test_export_the_filtered_list_as_excel(marketer, account):
    from openpyxl import load_workbook

    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="", tags=["vip"])
    contact_create(account_id=account.pk, email="bob@example.com", first_name="Bob", phone="")
    response = marketer.get(reverse("admin:contacts_contact_export") + "?tag=vip&format=xlsx")
    rows = list(load_workbook(io.BytesIO(response.content)).active.iter_rows(values_only=True))
    assert rows[0][:2] == ("id", "email")
    assert [row[1] for row in rows[1:]] == ["ada@example.com"]
