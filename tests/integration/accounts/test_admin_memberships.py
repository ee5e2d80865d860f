"""Memberships in the admin: staff members see who belongs to their account; only superusers change it."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from accounts.models import Membership
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def management(prefix: str, total: int, initial: int) -> dict:
    return {f"{prefix}-TOTAL_FORMS": str(total), f"{prefix}-INITIAL_FORMS": str(initial)}


def test_a_staff_member_cannot_promote_themselves_or_add_members(client, account):
    user = UserFactory(is_staff=True)
    membership = MembershipFactory(account=account, user=user, role="marketer")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="accounts"))
    outsider = UserFactory()
    client.force_login(user)
    url = reverse("admin:accounts_account_change", args=[account.pk])
    page = client.get(url)
    assert page.status_code == 200
    prefix = "memberships"
    assert f'name="{prefix}-0-role"' not in page.content.decode()  # shown read-only
    data = {
        "name": account.name,
        "slug": account.slug,
        **management(prefix, 2, 1),
        f"{prefix}-0-id": membership.pk,
        f"{prefix}-0-account": account.pk,
        f"{prefix}-0-user": user.pk,
        f"{prefix}-0-role": "owner",
        f"{prefix}-1-account": account.pk,
        f"{prefix}-1-user": outsider.pk,
        f"{prefix}-1-role": "owner",
    }
    client.post(url, data)
    membership.refresh_from_db()
    assert membership.role == "marketer"
    assert not Membership.objects.filter(user=outsider).exists()


def test_a_superuser_manages_members(client, superuser, account):
    outsider = UserFactory()
    client.force_login(superuser)
    url = reverse("admin:accounts_account_change", args=[account.pk])
    prefix = "memberships"
    existing = list(Membership.objects.filter(account=account).values_list("pk", "user_id", "role"))
    data = {
        "name": account.name,
        "slug": account.slug,
        "max_concurrent_executions": account.max_concurrent_executions,
        "max_concurrent_jobs": account.max_concurrent_jobs,
        "time_zone": account.time_zone,
        **management(prefix, len(existing) + 1, len(existing)),
    }
    for index, (pk, user_id, role) in enumerate(existing):
        data.update({f"{prefix}-{index}-id": pk, f"{prefix}-{index}-account": account.pk})
        data.update({f"{prefix}-{index}-user": user_id, f"{prefix}-{index}-role": role})
    index = len(existing)
    data.update({f"{prefix}-{index}-account": account.pk, f"{prefix}-{index}-user": outsider.pk})
    data[f"{prefix}-{index}-role"] = "viewer"
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Membership.objects.get(user=outsider, account=account).role == "viewer"
