"""What a running handler knows about its job."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from jobs.domain.errors import LeaseLost

if TYPE_CHECKING:
    from jobs.application.queue import JobSpec
    from jobs.infrastructure.store import JobStore


@dataclass
class JobContext:
    id: UUID
    handler: str
    queue: str
    attempt_number: int  # 1 on the first attempt
    max_attempts: int
    account_id: int | None
    worker_id: str
    started: float  # epoch seconds
    _store: JobStore = field(repr=False)
    completed_in_transaction: bool = False

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt_number >= self.max_attempts

    def mark_completed(self, *, then: Sequence[JobSpec] = ()) -> list[UUID]:
        """Mark this job completed inside the caller's open transaction, and queue `then` with it.

        The completion then commits or rolls back with the handler's own
        writes: a worker that crashes after the commit cannot run the job
        again, and a worker that lost its lease cannot commit (LeaseLost
        rolls the transaction back). Jobs in `then` (what follows this one)
        are queued by the same statement; their ids are returned in order.
        """
        from jobs.application.queue import prepare_job
        from jobs.infrastructure.store import Finished

        rows = [prepare_job(spec) for spec in then]
        done = Finished(self.id, self.attempt_number, self.started, time.time())
        acked, holders = self._store.complete_and_insert(self.worker_id, done, rows)
        if not acked:
            raise LeaseLost(f"job {self.id} attempt {self.attempt_number} is no longer held by {self.worker_id}")
        # Only once the completion is committed; if the transaction rolls back, the worker acknowledges.
        self._store.connection.on_commit(self._completed)
        return [holders[row.id] for row in rows]

    def _completed(self) -> None:
        self.completed_in_transaction = True
