"""Webhook signing secrets: one per account, created when first needed, rotated on request."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.application.selectors import account_exists
from integrations.domain.signing import generate_secret
from integrations.infrastructure.models import WebhookSigningSecret
from kernel import clock


class UnknownAccount(LookupError):
    def __init__(self, account_id: int) -> None:
        super().__init__(f"account_id: no account {account_id}")
        self.account_id = account_id


def webhook_secret_get_or_create(*, account_id: int) -> WebhookSigningSecret:
    """The account's secret, creating it on first use (two workers racing end with one secret)."""
    found = WebhookSigningSecret.objects.filter(account_id=account_id).first()
    if found is not None:
        return found
    if not account_exists(account_id):
        raise UnknownAccount(account_id)
    try:
        with transaction.atomic():
            return WebhookSigningSecret.objects.create(account_id=account_id, secret=generate_secret())
    except IntegrityError:  # another worker created it between our read and our insert
        return WebhookSigningSecret.objects.get(account_id=account_id)


def _forget(account_id: int) -> None:
    with _cache_lock:
        _cache.pop(account_id, None)


def forget_cached_secrets() -> None:
    """Empty this process's cache (tests, whose rolled-back accounts reuse ids)."""
    with _cache_lock:
        _cache.clear()


def webhook_signing_secrets(*, account_id: int) -> list[str]:
    """The secrets that sign the account's webhooks now: the current one, and the previous one during its grace."""
    return _signing_secrets_of(webhook_secret_get_or_create(account_id=account_id))


def _signing_secrets_of(record: WebhookSigningSecret) -> list[str]:
    secrets = [record.secret]
    if record.previous_secret and record.rotated_at is not None:
        grace = timedelta(hours=float(getattr(settings, "WEBHOOK_SECRET_ROTATION_GRACE_HOURS", 24.0)))
        if timezone.now() - record.rotated_at < grace:
            secrets.append(record.previous_secret)
    return secrets


# Signing reads the account's secrets for every webhook; a worker keeps them a few seconds. A rotation
# reaches other processes within that time (the old secret signs beside the new one for 24 hours).
SECRETS_CACHE_SECONDS = 5.0
_cache: dict[int, tuple[float, WebhookSigningSecret]] = {}
_cache_lock = threading.Lock()


def webhook_signing_secrets_cached(*, account_id: int) -> list[str]:
    """As webhook_signing_secrets, from a record read at most SECRETS_CACHE_SECONDS ago (the grace period
    is still judged now)."""
    now = time.monotonic()
    with _cache_lock:
        found = _cache.get(account_id)
    if found is None or now - found[0] >= SECRETS_CACHE_SECONDS:
        found = (now, webhook_secret_get_or_create(account_id=account_id))
        with _cache_lock:
            _cache[account_id] = found
    return _signing_secrets_of(found[1])


@transaction.atomic
def webhook_secret_rotate(*, account_id: int) -> WebhookSigningSecret:
    """Issue a new secret; the old one keeps signing beside it for the grace period."""
    with _cache_lock:
        _cache.pop(account_id, None)
    transaction.on_commit(lambda: _forget(account_id))
    record = webhook_secret_get_or_create(account_id=account_id)
    record = WebhookSigningSecret.objects.select_for_update().get(pk=record.pk)
    record.previous_secret = record.secret
    record.secret = generate_secret()
    record.rotated_at = clock.now()  # the database's: the grace is judged on other hosts
    record.save(update_fields=["previous_secret", "secret", "rotated_at"])
    return record
