"""Webhook signing secrets: created once per account, rotated with a grace period, never shown whole."""

import logging

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from integrations.application.secrets import (
    UnknownAccount,
    webhook_secret_get_or_create,
    webhook_secret_rotate,
    webhook_signing_secrets,
)
from integrations.infrastructure.models import WebhookSigningSecret

pytestmark = pytest.mark.django_db


def test_created_lazily_once_per_account(account, other_account):
    assert not WebhookSigningSecret.objects.exists()
    first = webhook_signing_secrets(account_id=account.id)
    again = webhook_signing_secrets(account_id=account.id)
    other = webhook_signing_secrets(account_id=other_account.id)
    assert first == again
    assert len(first) == 1
    assert first[0].startswith("whsec_")
    assert other != first
    assert WebhookSigningSecret.objects.count() == 2


def test_an_unknown_account_has_no_secret():
    with pytest.raises(UnknownAccount, match="account_id: no account 424242"):
        webhook_signing_secrets(account_id=424242)
    assert not WebhookSigningSecret.objects.exists()


def test_rotation_keeps_the_previous_secret_for_the_grace_period(settings, account):
    old = webhook_secret_get_or_create(account_id=account.id).secret
    new = webhook_secret_rotate(account_id=account.id).secret
    assert new != old
    assert webhook_signing_secrets(account_id=account.id) == [new, old]
    settings.WEBHOOK_SECRET_ROTATION_GRACE_HOURS = 0
    assert webhook_signing_secrets(account_id=account.id) == [new]


def test_the_secret_is_masked_in_repr_str_and_the_admin(account, superuser, caplog):
    caplog.set_level(logging.DEBUG)
    record = webhook_secret_get_or_create(account_id=account.id)
    assert record.secret not in repr(record)
    assert record.secret not in str(record)
    client = Client()
    client.force_login(superuser)
    listing = client.get("/admin/integrations/webhooksigningsecret/")
    detail = client.get(f"/admin/integrations/webhooksigningsecret/{record.pk}/change/")
    assert listing.status_code == detail.status_code == 200
    assert record.secret[:10].encode() in listing.content  # the masked prefix tells secrets apart
    assert record.secret.encode() not in listing.content + detail.content
    assert record.secret not in caplog.text


def test_the_admin_action_rotates(account, superuser):
    record = webhook_secret_get_or_create(account_id=account.id)
    client = Client()
    client.force_login(superuser)
    response = client.post(
        "/admin/integrations/webhooksigningsecret/", {"action": "rotate", "_selected_action": [record.pk]}
    )
    assert response.status_code == 302
    record.refresh_from_db()
    assert record.previous_secret
    assert record.rotated_at is not None


def test_the_command_prints_and_rotates(account, capsys):
    call_command("webhook_secret", account.slug)
    shown = capsys.readouterr().out.strip()
    assert shown == WebhookSigningSecret.objects.get(account=account).secret
    call_command("webhook_secret", account.slug, "--rotate")
    rotated = capsys.readouterr().out.strip()
    assert rotated != shown
    assert rotated == WebhookSigningSecret.objects.get(account=account).secret
    with pytest.raises(CommandError, match="account: no account with slug 'nope'"):
        call_command("webhook_secret", "nope")
