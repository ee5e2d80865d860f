"""An operator's move (pause, resume, cancel, retry) applied to every run of an account a filter matches.

Runs are read a batch at a time (keyset on id), and each allowed run is moved by the one-run use case
(`RUN_OPERATIONS`), in its own short transaction under its own lock: no lock is ever held on more than one
run, and the rules are those of the one-run endpoints. A run whose state does not allow the move, or that
moved on meanwhile, is counted in `not_allowed`. `dry_run` counts without changing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from jobs.public.operations import BulkOutcome
from workflows.application.errors import NotFound
from workflows.application.runs.operating import RUN_OPERATIONS, Operator, retry_run
from workflows.domain.errors import IllegalExecutionTransition
from workflows.domain.execution import OPERATOR_MOVES
from workflows.infrastructure.models import WorkflowExecution

BATCH = 500


def runs_bulk_move(
    *,
    account_id: int,
    operation: str,
    status: str | None = None,
    workflow_id: int | None = None,
    contact_id: int | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH,
    by: Operator | None = None,
) -> BulkOutcome:
    """`by`: who asked, for the history of the runs a retry lifts the loop cap of."""
    allowed_from = OPERATOR_MOVES[operation]
    operate: Callable[..., object] = RUN_OPERATIONS[operation]

    def move(**kwargs: Any) -> object:
        return retry_run(**kwargs, by=by) if operation == "retry" else operate(**kwargs)

    query = WorkflowExecution.objects.filter(account_id=account_id)
    for field, value in (("status", status), ("workflow_id", workflow_id), ("contact_id", contact_id)):
        if value is not None:
            query = query.filter(**{field: value})
    if created_after is not None:
        query = query.filter(created_at__gte=created_after)
    if created_before is not None:
        query = query.filter(created_at__lt=created_before)
    matched = changed = 0
    last = None
    while True:
        page = query.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        rows = list(page.values_list("pk", "status")[:batch_size])
        if not rows:
            break
        last = rows[-1][0]
        matched += len(rows)
        for pk, current in rows:
            if current not in allowed_from:
                continue
            if dry_run:
                changed += 1
                continue
            try:
                move(execution_id=pk, account_id=account_id)
                changed += 1
            except (IllegalExecutionTransition, NotFound):
                pass  # it moved on (or was deleted) since the batch was read
    return BulkOutcome(matched, changed, matched - changed, dry_run=dry_run)
