"""What the job queue must know of its tenants: each account's limit, and that an account or a user is gone.

The queue keeps its own copy of every account's `max_concurrent_jobs` beside its jobs (it may live in a
database of its own, JOBS_DATABASE), and its jobs name accounts and users without a foreign-key constraint.
Signals, so every way an account is saved or deleted (the use cases, the admin, the API, a shell) is covered;
what sends no signal (a queryset's update(), bulk_create) is healed by the queue's periodic repair, which
reads every limit through the accounts' selectors. Wired in JobsConfig.ready().

This lives in the queue, not in accounts: the tenancy app is a leaf that imports no other app, and the
queue, which needs the limits, listens to it (docs/decisions/import-contracts.md). The senders are named
lazily ("accounts.Account", AUTH_USER_MODEL), so the queue imports no accounts model.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save, pre_delete

from accounts.application.selectors import job_limits
from jobs.application.limits import forget_account, forget_user, register_limit_source, set_account_limit

ACCOUNT_MODEL = "accounts.Account"


def _account_saved(sender: Any, instance: Any, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    if created or update_fields is None or "max_concurrent_jobs" in update_fields:
        set_account_limit(instance.pk, instance.max_concurrent_jobs)


def _account_deleted(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    forget_account(instance.pk, deleting_on=using)


def _user_deleted(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    forget_user(instance.pk, deleting_on=using)


def connect() -> None:
    register_limit_source(job_limits)
    post_save.connect(_account_saved, sender=ACCOUNT_MODEL, dispatch_uid="relay.accounts.queue_limit")
    pre_delete.connect(_account_deleted, sender=ACCOUNT_MODEL, dispatch_uid="relay.accounts.queue_forget_account")
    pre_delete.connect(_user_deleted, sender=settings.AUTH_USER_MODEL, dispatch_uid="relay.accounts.queue_forget_user")
