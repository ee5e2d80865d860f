"""The accounts' limits as the queue keeps them, and what the queue does when an account or a user goes.

The claim reads each account's `max_concurrent_jobs` from the queue's own table (`AccountLimit`), never from
the accounts' table, which may live in another database (JOBS_DATABASE). The accounts app keeps it in step:
it calls `set_account_limit` when an account is created or its limit changes, and registers where all the
limits come from (`register_limit_source`) so `repair_limits` can copy every one of them (each worker at
start and every REPAIR_SECONDS): a crash between the two databases' commits, a bulk write that sent no
signal, or a rolled-back change that reached the queue's table first, is healed by the next repair.

Deleting an account or a user clears it from the queue's jobs (`forget_account`, `forget_user`): the jobs'
foreign keys have no constraint and Django does nothing on delete (it would look for jobs in the deleted
row's database). With the queue in the same database this happens in the deleting transaction; with the
queue apart, when that transaction commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import AccountLimit, Job

log = logging.getLogger("relay.jobs")

REPAIR_SECONDS = 300.0  # how often each worker copies every account's limit to the queue's table

LimitSource = Callable[[], Iterable[tuple[int, int]]]  # every account's (id, max_concurrent_jobs)
_sources: list[LimitSource] = []


def register_limit_source(source: LimitSource) -> None:
    """Where every account's limit comes from (the accounts app, from its ready())."""
    if source not in _sources:
        _sources.append(source)


def set_account_limit(account_id: int, limit: int) -> None:
    """The queue's copy of one account's limit; the next claim honours it.

    On the queue's database: inside its open transaction if the caller has one there (the same database as
    the accounts' table: then atomic with the account's own write), at once otherwise.
    """
    set_account_limits([(account_id, limit)])


def set_account_limits(limits: Iterable[tuple[int, int]]) -> int:
    """Write these (account id, limit) pairs to the queue's table (one statement); returns how many."""
    rows = [AccountLimit(account_id=account_id, max_concurrent_jobs=limit) for account_id, limit in limits]
    if rows:
        AccountLimit.objects.using(queue_database()).bulk_create(
            rows, update_conflicts=True, unique_fields=["account_id"], update_fields=["max_concurrent_jobs"]
        )
    return len(rows)


def repair_limits() -> int:
    """Copy every account's limit to the queue's table and drop the rows of accounts that are gone.

    Idempotent; run by every worker at start and every REPAIR_SECONDS. Returns the rows changed.
    """
    if not _sources:
        return 0
    wanted: dict[int, int] = {}
    for source in _sources:
        wanted.update(source())
    using = queue_database()
    held = dict(AccountLimit.objects.using(using).values_list("account_id", "max_concurrent_jobs"))
    changed = [(pk, limit) for pk, limit in wanted.items() if held.get(pk) != limit]
    gone = [pk for pk in held if pk not in wanted]
    if not changed and not gone:
        return 0  # the usual case: one read of each table, no write
    with transaction.atomic(using=using):
        set_account_limits(changed)
        if gone:
            AccountLimit.objects.using(using).filter(account_id__in=gone).delete()
    log.info("account limits repaired: %d written, %d removed", len(changed), len(gone))
    return len(changed) + len(gone)


def forget_account(account_id: int, *, deleting_on: str = DEFAULT_DB_ALIAS) -> None:
    """An account is being deleted (in `deleting_on`'s transaction): its jobs keep running without one."""
    _after_commit_of(deleting_on, lambda: _forget_account_now(account_id))


def forget_user(user_id: int, *, deleting_on: str = DEFAULT_DB_ALIAS) -> None:
    """A user is being deleted: the jobs they queued no longer name them."""
    _after_commit_of(deleting_on, lambda: _forget_user_now(user_id))


def _forget_account_now(account_id: int) -> None:
    using = queue_database()
    with transaction.atomic(using=using):
        # Its waiting jobs move to the lanes of jobs without an account (the lanes' update trigger follows).
        Job.objects.using(using).filter(account_id=account_id).update(account_id=None)
        AccountLimit.objects.using(using).filter(account_id=account_id).delete()


def _forget_user_now(user_id: int) -> None:
    Job.objects.using(queue_database()).filter(created_by_id=user_id).update(created_by_id=None)


def _after_commit_of(alias: str, step: Callable[[], None]) -> None:
    """Now, in the caller's transaction, when the queue shares its database; else once that commits."""
    if alias == queue_database() or not connections[alias].in_atomic_block:
        step()
    else:
        transaction.on_commit(step, using=alias)
