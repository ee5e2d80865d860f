"""The audit log: who did what in which account, and when (the database's clock). Other apps record through
here (`audit_record`), inside the transaction of what they record, so an event exists if and only if the
action went ahead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.domain.audit import AuditAction
from accounts.infrastructure.models import AuditEvent


@transaction.atomic
def audit_record(
    *, action: AuditAction, actor_id: int | None, details: Mapping[int, Mapping[str, Any]]
) -> list[AuditEvent]:
    """One event per account (`details`: account id -> what to record of it there), all or none."""
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id is not None else None
    name = actor.get_username() if actor is not None else ""
    events = []
    for account_id, detail in sorted(details.items()):
        events.append(
            AuditEvent(account_id=account_id, actor=actor, actor_name=name, action=action, detail=dict(detail))
        )
    return AuditEvent.objects.bulk_create(events)
