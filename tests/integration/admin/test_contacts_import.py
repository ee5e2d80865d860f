"""Contacts in lists: import a CSV or XLSX through the admin (preview, mapping, per-row problems, all or
nothing), optionally enrolling everyone into a workflow on the queue; export the filtered list."""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from contacts.application.services import contact_create
from contacts.domain.model import MAX_TAGS
from contacts.infrastructure.models import Contact, ContactImport
from jobs.infrastructure.models import Job
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


def test_a_time_zone_column_sets_each_contacts_clock_new_or_updated(marketer, account):
    contact_create(account_id=account.pk, email="here@example.com")
    content = b"Email,Time zone\nnew@example.com,asia/tokyo\nhere@example.com,America/New_York\n"
    record = upload(marketer, account, "zones.csv", content)
    assert record.mapping == ["email", "time_zone"]
    marketer.post(reverse("admin:contacts_contact_import_detail", args=[record.pk]), mapping_post(record))
    run_due_jobs()
    record.refresh_from_db()
    assert record.status == "imported", record.problems
    zones = dict(Contact.objects.filter(account=account).values_list("email", "time_zone"))
    assert zones == {"new@example.com": "Asia/Tokyo", "here@example.com": "America/New_York"}


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


def _csv(*rows: list[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue().encode()


def _tags(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _import(client, account, content: bytes, **options) -> ContactImport:
    record = upload(client, account, "list.csv", content)
    response = client.post(
        reverse("admin:contacts_contact_import_detail", args=[record.pk]), mapping_post(record, **options)
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run_due_jobs()
    record.refresh_from_db()
    return record


def test_a_contact_here_that_the_file_would_take_past_max_tags_refuses_the_file_before_any_write(marketer, account):
    full = contact_create(account_id=account.pk, email="full@example.com", tags=_tags("old", MAX_TAGS - 1))
    content = _csv(
        ["email", "first name", "tags"], ["new@example.com", "New", "a"], ["full@example.com", "Full", "x, y"]
    )
    record = _import(marketer, account, content)
    # Refused as a problem of its row, with nothing written: not an import job failing halfway and retrying.
    assert record.status == "refused", record.problems
    assert [(p["row"], p["column"]) for p in record.problems] == [(3, "tags")]
    assert record.problems[0]["message"] == (
        f"would give the contact {MAX_TAGS + 1} tags ({MAX_TAGS - 1} it has, 2 from this row); "
        f"a contact has at most {MAX_TAGS} tags; remove one first"
    )
    assert not Contact.objects.filter(email="new@example.com").exists()
    full.refresh_from_db()
    assert (full.first_name, len(full.tags)) == ("", MAX_TAGS - 1)
    assert Job.objects.get(handler="contacts.import").status == "completed"
    # Left as they are, contacts already here are no problem.
    assert _import(marketer, account, content, existing="skip").status == "imported"


def test_the_tag_for_everyone_may_not_take_a_contact_past_max_tags(marketer, account):
    contact_create(account_id=account.pk, email="full@example.com", tags=_tags("old", MAX_TAGS))
    content = _csv(
        ["email", "tags"],
        ["new@example.com", ",".join(_tags("t", MAX_TAGS))],  # a full row: fine alone, one too many with the tag
        ["ok@example.com", "vip"],
        ["full@example.com", ""],
    )
    record = _import(marketer, account, content, tag="webinar")
    assert record.status == "refused", record.problems
    assert [(p["row"], p["column"]) for p in record.problems] == [(2, "tags"), (4, "tags")]
    assert "(100 from this row, “webinar” for everyone)" in record.problems[0]["message"]
    assert "(100 it has, “webinar” for everyone)" in record.problems[1]["message"]
    assert not Contact.objects.filter(email__in=["new@example.com", "ok@example.com"]).exists()
    # Without the tag for everyone, the same file goes in whole.
    record = _import(marketer, account, content)
    assert record.status == "imported", record.problems
    assert len(Contact.objects.get(email="new@example.com").tags) == MAX_TAGS


def _refused_enrollment(client, account) -> tuple[ContactImport, str]:
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}], name="Onboarding")
    record = upload(client, account, "list.csv", b"email\nada@example.com\n")
    response = client.post(
        reverse("admin:contacts_contact_import_detail", args=[record.pk]),
        mapping_post(record, then_enroll=str(workflow.pk)),
    )
    assert response.status_code == 200  # the mapping page again, with the refusal on the field
    record.refresh_from_db()
    assert record.status == "uploaded"  # nothing queued: no import, no enrollment
    assert record.options.get("then") is None
    return record, response.content.decode()


def test_enrolling_the_imported_contacts_needs_a_role_that_starts_runs_in_the_account(marketer, account, monkeypatch):
    from accounts.domain.roles import ROLE_PERMISSIONS, Permission, Role

    # A role that may manage contacts but not run workflows (none of today's roles is one).
    monkeypatch.setitem(ROLE_PERMISSIONS, Role.MARKETER, ROLE_PERMISSIONS[Role.MARKETER] - {Permission.RUN_WORKFLOWS})
    _record, page = _refused_enrollment(marketer, account)
    assert "Enrolling them starts a run of “Onboarding” for each contact, and you may not start runs in" in page
    run_due_jobs()
    assert not Contact.objects.exists()
    assert not WorkflowExecution.objects.exists()


def test_enrolling_the_imported_contacts_needs_the_permission_to_start_runs(client, account):
    from django.contrib.auth.models import Permission as DjangoPermission

    user = UserFactory(is_staff=True)
    MembershipFactory(account=account, user=user, role="marketer")
    codenames = ["view_contact", "add_contact", "change_contact", "view_workflow"]  # not add_workflowexecution
    user.user_permissions.add(*DjangoPermission.objects.filter(codename__in=codenames))
    client.force_login(user)
    record, page = _refused_enrollment(client, account)
    assert f"you may not start runs in {account.name}" in page
    # Without the enrollment the same user imports the file.
    client.post(reverse("admin:contacts_contact_import_detail", args=[record.pk]), mapping_post(record))
    run_due_jobs()
    record.refresh_from_db()
    assert record.status == "imported"
    assert not WorkflowExecution.objects.exists()


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
