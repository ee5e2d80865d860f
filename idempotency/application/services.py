"""Remembering answers by Idempotency-Key: the first answer is given back to every retry of the same request.

    remembered = remember(account_id=..., key=key, fingerprint=fp, produce=lambda: Answer(201, body))
    remembered.answer, remembered.replayed

`produce` runs inside this function's transaction, after the key's record
was claimed, and its work commits together with the remembered answer:
the key is remembered if and only if the work was done. Two requests with
the same key at once: on PostgreSQL the second one's claim waits on the
unique index until the first commits, then replays its answer (or, if the
first failed and rolled back, does the work itself). A refusal (a raised
error, or a non-2xx answer) is not remembered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from idempotency.domain.keys import Answer, replay
from idempotency.infrastructure.models import IdempotencyRecord

PURGE_CHUNK = 5000


@dataclass(frozen=True)
class Remembered:
    answer: Answer
    replayed: bool  # True: the answer first given to this key, nothing was done this time


def key_ttl() -> timedelta:
    return timedelta(hours=float(settings.API_IDEMPOTENCY_KEY_TTL_HOURS))


def remember(
    *,
    account_id: int,
    key: str,
    fingerprint: str,
    produce: Callable[[], Answer],
    now: datetime | None = None,
) -> Remembered:
    """The answer remembered for `key` (KeyReused if it was for another request), or `produce()`'s, remembered."""
    now = now or timezone.now()
    with transaction.atomic():
        record = _current(account_id, key, now)
        if record is not None:
            return Remembered(_replayed(record, fingerprint), replayed=True)
        try:
            with transaction.atomic():  # a savepoint: a lost race leaves the outer transaction usable
                # Claims the key; status 0 is never seen by anyone, it is replaced before this commits.
                record = IdempotencyRecord.objects.create(
                    account_id=account_id,
                    key=key,
                    fingerprint=fingerprint,
                    status_code=0,
                    body="",
                    expires_at=now + key_ttl(),
                )
        except IntegrityError:
            # Another request with this key committed first (PostgreSQL made this insert wait for it).
            record = IdempotencyRecord.objects.get(account_id=account_id, key=key)
            return Remembered(_replayed(record, fingerprint), replayed=True)
        answer = produce()
        if answer.remembered:
            record.status_code, record.body, record.headers = answer.status, answer.body, dict(answer.headers)
            record.save(update_fields=["status_code", "body", "headers"])
        else:
            record.delete()
        return Remembered(answer, replayed=False)


def _current(account_id: int, key: str, now: datetime) -> IdempotencyRecord | None:
    """The key's record if it has not expired; an expired one is deleted, so the key is new again."""
    record = IdempotencyRecord.objects.select_for_update().filter(account_id=account_id, key=key).first()
    if record is not None and record.expires_at <= now:
        record.delete()
        return None
    return record


def _replayed(record: IdempotencyRecord, fingerprint: str) -> Answer:
    stored = Answer(status=record.status_code, body=record.body, headers=dict(record.headers or {}))
    return replay(stored_fingerprint=record.fingerprint, stored=stored, request_fingerprint=fingerprint)


def purge_expired(*, now: datetime | None = None, chunk: int = PURGE_CHUNK) -> int:
    """Delete every expired record, in chunks (a big purge never holds one long lock); returns how many."""
    now = now or timezone.now()
    deleted = 0
    while True:
        ids = list(IdempotencyRecord.objects.filter(expires_at__lte=now).values_list("pk", flat=True)[:chunk])
        if not ids:
            return deleted
        deleted += IdempotencyRecord.objects.filter(pk__in=ids).delete()[0]
