"""What the job queue must know of accounts: each account's limit, and that an account or a user is gone.

The queue keeps its own copy of every account's `max_concurrent_jobs` beside its jobs (it may live in a
database of its own, JOBS_DATABASE), and its jobs name accounts and users without a foreign-key constraint.
Signals, so every way an account is saved or deleted (the use cases, the admin, the API, a shell) is covered;
what sends no signal (a queryset's update(), bulk_create) is healed by the queue's periodic repair, which
reads `all_limits`. Wired in AccountsConfig.ready().
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_save, pre_delete

from accounts.infrastructure.models import Account
from jobs.application.limits import forget_account, forget_user, register_limit_source, set_account_limit


def all_limits() -> Iterable[tuple[int, int]]:
    return Account.objects.order_by().values_list("pk", "max_concurrent_jobs").iterator(chunk_size=5000)


def _account_saved(sender: Any, instance: Account, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    if created or update_fields is None or "max_concurrent_jobs" in update_fields:
        set_account_limit(instance.pk, instance.max_concurrent_jobs)


def _account_deleted(sender: Any, instance: Account, using: str, **kwargs: Any) -> None:
    forget_account(instance.pk, deleting_on=using)


def _user_deleted(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    forget_user(instance.pk, deleting_on=using)


def connect() -> None:
    register_limit_source(all_limits)
    post_save.connect(_account_saved, sender=Account, dispatch_uid="relay.accounts.queue_limit")
    pre_delete.connect(_account_deleted, sender=Account, dispatch_uid="relay.accounts.queue_forget_account")
    pre_delete.connect(_user_deleted, sender=get_user_model(), dispatch_uid="relay.accounts.queue_forget_user")
