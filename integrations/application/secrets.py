"""Webhook signing secrets: one per account, created when first needed, rotated on request."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Account
from integrations.domain.signing import generate_secret
from integrations.infrastructure.models import WebhookSigningSecret


class UnknownAccount(LookupError):
    def __init__(self, account_id: int) -> None:
        super().__init__(f"account_id: no account {account_id}")
        self.account_id = account_id


def webhook_secret_get_or_create(*, account_id: int) -> WebhookSigningSecret:
    """The account's secret, creating it on first use (two workers racing end with one secret)."""
    found = WebhookSigningSecret.objects.filter(account_id=account_id).first()
    if found is not None:
        return found
    if not Account.objects.filter(pk=account_id).exists():
        raise UnknownAccount(account_id)
    try:
        with transaction.atomic():
            return WebhookSigningSecret.objects.create(account_id=account_id, secret=generate_secret())
    except IntegrityError:  # another worker created it between our read and our insert
        return WebhookSigningSecret.objects.get(account_id=account_id)


def webhook_signing_secrets(*, account_id: int) -> list[str]:
    """The secrets that sign the account's webhooks now: the current one, and the previous one during its grace."""
    record = webhook_secret_get_or_create(account_id=account_id)
    secrets = [record.secret]
    if record.previous_secret and record.rotated_at is not None:
        grace = timedelta(hours=float(getattr(settings, "WEBHOOK_SECRET_ROTATION_GRACE_HOURS", 24.0)))
        if timezone.now() - record.rotated_at < grace:
            secrets.append(record.previous_secret)
    return secrets


@transaction.atomic
def webhook_secret_rotate(*, account_id: int) -> WebhookSigningSecret:
    """Issue a new secret; the old one keeps signing beside it for the grace period."""
    record = webhook_secret_get_or_create(account_id=account_id)
    record = WebhookSigningSecret.objects.select_for_update().get(pk=record.pk)
    record.previous_secret = record.secret
    record.secret = generate_secret()
    record.rotated_at = timezone.now()
    record.save(update_fields=["previous_secret", "secret", "rotated_at"])
    return record
