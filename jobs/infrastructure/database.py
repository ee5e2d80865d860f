"""Which database holds the queue (`JOBS_DATABASE`), and the router that sends the jobs app's tables there.

By default the queue lives in the `default` database with everything else, and enqueue joins the caller's
transaction. With `JOBS_DATABASE_URL` set, settings add an alias `jobs` and set `JOBS_DATABASE = "jobs"`:
the queue's tables (jobs, lanes, schedules, metrics, the accounts' limits) live there, and the other apps'
tables stay in `default`. The outbox (`OutboxJob`) is the exception: it is the jobs app's model but lives in
the *callers'* databases, so a job queued inside a transaction on `default` is written with that
transaction (docs/subsystems/queue-in-its-own-database.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import QuerySet

APP_LABEL = "jobs"
OUTBOX_MODEL = "outboxjob"


def queue_database() -> str:
    """The alias of the database that holds the queue (settings.JOBS_DATABASE, "default" unless set)."""
    return getattr(settings, "JOBS_DATABASE", DEFAULT_DB_ALIAS) or DEFAULT_DB_ALIAS


def is_split() -> bool:
    """Whether the queue lives in a database of its own, apart from `default`."""
    return queue_database() != DEFAULT_DB_ALIAS


def caller_databases() -> list[str]:
    """The databases other than the queue's: where callers' transactions (and the outbox) live."""
    return [alias for alias in settings.DATABASES if alias != queue_database()]


def _is_outbox(model: Any) -> bool:
    return model._meta.app_label == APP_LABEL and model._meta.model_name == OUTBOX_MODEL


class JobsRouter:
    """Sends the jobs app's models to the queue's database; keeps every other app's tables off it.

    With the queue in `default` (no JOBS_DATABASE) it decides nothing and Django's defaults hold.
    """

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        if _is_outbox(model):
            return None
        if model._meta.app_label != APP_LABEL:
            # A job's account or user, reached from the job: in `default`, not in the job's database (which
            # Django would otherwise assume).
            instance = hints.get("instance")
            if is_split() and instance is not None and instance._meta.app_label == APP_LABEL:
                return DEFAULT_DB_ALIAS
            return None
        return queue_database()

    db_for_write = db_for_read

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        """A job may name an account or a user of another database: the foreign keys have no constraint
        (db_constraint=False) and the queue clears them itself when those rows are deleted."""
        if (obj1._meta.app_label == APP_LABEL) != (obj2._meta.app_label == APP_LABEL):
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        if not is_split():
            return None
        if app_label == APP_LABEL:
            if model_name == OUTBOX_MODEL:
                return db != queue_database()
            # Its models, and its RunSQL / RunPython (no model_name: the queue's functions and data).
            return db == queue_database()
        return db != queue_database()


def queue_atomic(*, savepoint: bool = True) -> transaction.Atomic:
    """A transaction on the queue's database (`with queue_atomic():`), resolved when entered."""
    return transaction.atomic(using=queue_database(), savepoint=savepoint)


def in_queue_transaction[F: Callable[..., Any]](func: F) -> F:
    """Run `func` inside a transaction on the queue's database (the decorator form of queue_atomic)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with queue_atomic():
            return func(*args, **kwargs)

    return cast(F, wrapper)


def in_queue_transaction_now() -> bool:
    """Whether this thread has a transaction open on the queue's database (enqueue then joins it)."""
    return connections[queue_database()].in_atomic_block


def with_account[Q: QuerySet](jobs: Q) -> Q:
    """Jobs with their account joined in (one query), where the accounts' table is in the same database;
    with the queue apart, each account is read from `default` when first used."""
    return jobs if is_split() else jobs.select_related("account")
