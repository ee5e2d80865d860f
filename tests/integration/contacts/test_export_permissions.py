"""Who may export contacts, and the audit log that records every export.

README gives export to the marketer (and owners and admins); a viewer, and staff who may only view, export
nothing: not through the list's link (either format), not through the admin action, not by posting it."""

import csv
import io

import pytest
from django.contrib.auth.models import Permission as DjangoPermission
from django.urls import reverse

from accounts.infrastructure.models import AuditEvent
from contacts.application.services import contact_create
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from workflows.admin_roles import grant_role

pytestmark = pytest.mark.django_db

EXPORT = "admin:contacts_contact_export"


@pytest.fixture
def contacts(account):
    return [
        contact_create(account_id=account.pk, email=f"c{i}@example.com", first_name=f"C{i}", phone="", tags=tags)
        for i, tags in enumerate([["vip"], ["vip"], []])
    ]


def staff(client, account, role, *, group=None, view_only=False):
    """A staff member of `account` in `role`, in the admin group of `group` (default: the role's own)."""
    user = UserFactory()
    MembershipFactory(account=account, user=user, role=role)
    if view_only:  # an owner whose Django permissions are all view_*
        user.is_staff = True
        user.save(update_fields=["is_staff"])
        user.user_permissions.add(*DjangoPermission.objects.filter(codename__startswith="view_"))
    else:
        grant_role(user, group or role)
    client.force_login(user)
    return user


def _refused(client, contacts):
    changelist = reverse("admin:contacts_contact_changelist")
    for query in ("", "?format=xlsx", "?tag=vip"):
        assert client.get(reverse(EXPORT) + query).status_code == 403, query
    page = client.get(changelist).content.decode()
    assert reverse(EXPORT) not in page  # no export link
    assert 'value="export_csv"' not in page  # nor the action
    posted = client.post(changelist, {"action": "export_csv", "_selected_action": [c.pk for c in contacts]})
    assert "attachment" not in posted.get("Content-Disposition", "")
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("role", "group", "view_only"),
    [
        ("viewer", "viewer", False),
        ("viewer", "marketer", False),  # the marketers' admin group, a viewer's role in the account
        ("viewer", "operator", False),
        ("owner", None, True),  # view-only staff: Django's view permissions only
    ],
)
def test_who_may_not_export_gets_no_file(client, account, contacts, role, group, view_only):
    staff(client, account, role, group=group, view_only=view_only)
    _refused(client, contacts)


def test_a_marketer_exports_and_each_export_is_audited(client, account, contacts):
    user = staff(client, account, "marketer")
    page = client.get(reverse("admin:contacts_contact_changelist")).content.decode()
    assert reverse(EXPORT) in page
    body = b"".join(client.get(reverse(EXPORT) + "?tag=vip").streaming_content).decode()
    assert len(list(csv.DictReader(io.StringIO(body)))) == 2
    response = client.get(reverse(EXPORT) + "?format=xlsx")
    assert response["Content-Disposition"] == 'attachment; filename="contacts.xlsx"'
    response = client.post(
        reverse("admin:contacts_contact_changelist"), {"action": "export_csv", "_selected_action": [contacts[0].pk]}
    )
    assert len(list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))) == 2  # header + 1
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.account_id, e.actor_id, e.actor_name, e.action) for e in events] == [
        (account.pk, user.pk, user.username, "contacts.exported")
    ] * 3
    assert [e.detail for e in events] == [
        {"rows": 2, "format": "csv", "via": "list"},
        {"rows": 3, "format": "xlsx", "via": "list"},
        {"rows": 1, "format": "csv", "via": "selection"},
    ]
    assert all(e.created_at is not None for e in events)


def test_an_export_holds_only_the_accounts_where_the_role_may_export(client, account, contacts):
    """A marketer of one account and a viewer of another: the export (and its audit) is the first's alone."""
    other = AccountFactory()
    contact_create(account_id=other.pk, email="theirs@example.com", phone="")
    user = staff(client, account, "marketer")
    MembershipFactory(account=other, user=user, role="viewer")
    body = b"".join(client.get(reverse(EXPORT)).streaming_content).decode()
    assert "c0@example.com" in body
    assert "theirs@example.com" not in body
    assert list(AuditEvent.objects.values_list("account_id", "detail")) == [
        (account.pk, {"rows": 3, "format": "csv", "via": "list"})
    ]


def test_a_superuser_export_is_audited_per_account(client, account, contacts):
    other = AccountFactory()
    contact_create(account_id=other.pk, email="theirs@example.com", phone="")
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    client.get(reverse(EXPORT) + "?format=xlsx")
    assert dict(AuditEvent.objects.values_list("account_id", "detail__rows")) == {account.pk: 3, other.pk: 1}


def test_the_audit_log_is_read_only_and_the_account_managers(client, account, contacts):
    staff(client, account, "marketer")
    client.get(reverse(EXPORT))
    event = AuditEvent.objects.get()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    page = client.get(reverse("admin:accounts_auditevent_changelist")).content.decode()
    assert "contacts.exported" in page
    assert client.get(reverse("admin:accounts_auditevent_change", args=[event.pk])).status_code == 200
    assert client.get(reverse("admin:accounts_auditevent_delete", args=[event.pk])).status_code == 403
    viewer = staff(client, account, "viewer")
    viewer.user_permissions.add(DjangoPermission.objects.get(codename="view_auditevent"))
    assert client.get(reverse("admin:accounts_auditevent_changelist")).status_code == 403
