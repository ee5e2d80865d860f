"""The ledger in the admin: read-only, and fenced by account like every other row."""

from __future__ import annotations

import pytest
from django.urls import reverse

from integrations.infrastructure.ledger import Ledger, NewMessage
from integrations.infrastructure.models import OutboundMessage
from tests.factories import ContactFactory, MembershipFactory
from workflows.admin_roles import grant_role

pytestmark = pytest.mark.django_db


def test_a_member_sees_their_accounts_messages_read_only_and_no_other_accounts(client, account, other_account):
    mine = ContactFactory(account=account)
    theirs = ContactFactory(account=other_account)
    Ledger().let_through(NewMessage("mine-1", "email", "marketing", mine.email, account.pk, mine.pk))
    Ledger().let_through(NewMessage("theirs-1", "email", "marketing", theirs.email, other_account.pk, theirs.pk))
    user = MembershipFactory(account=account, role="viewer").user
    grant_role(user, "viewer")
    client.force_login(user)
    page = client.get(reverse("admin:integrations_outboundmessage_changelist"))
    assert page.status_code == 200
    listed = list(page.context["cl"].result_list)
    assert [row.idempotency_key for row in listed] == ["mine-1"]
    row = OutboundMessage.objects.get(idempotency_key="mine-1")
    detail = client.get(reverse("admin:integrations_outboundmessage_change", args=[row.pk]))
    assert detail.status_code == 200
    assert b'name="status"' not in detail.content  # shown, not editable
    assert client.get(reverse("admin:integrations_outboundmessage_add")).status_code == 403
    other = OutboundMessage.objects.get(idempotency_key="theirs-1")
    assert client.get(reverse("admin:integrations_outboundmessage_change", args=[other.pk])).status_code == 302
