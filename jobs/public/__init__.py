"""The queue's published package: the one place code outside the queue imports it from.

    from jobs.public import JobContext, PermanentError, RetryableError, enqueue, job_handler

This module is the handler API (queue work, handle it, fail it, or snooze it: `job.snooze(seconds)` or
`raise JobSnooze(seconds)` puts the job back until later without counting an attempt). Its submodules are
the rest of what other apps use, one purpose each:

- `jobs.public.handlers`: registration in full (batch handlers, dead-letter hooks, payload readers);
- `jobs.public.schedules`: an app's own cron schedules (create, pause, resume, delete; built-in ones);
- `jobs.public.operations`: what an operator does and sees (overview, cancel, retry, jobs carrying a value,
  notifications on the worker's LISTEN connection, tables the workers vacuum);
- `jobs.public.metrics`: counters and gauges of another app, exposed with the queue's;
- `jobs.public.storage`: what another app's store needs of the queue's database (where, its clock, its
  outbox, its ids);
- `jobs.public.admin`, `jobs.public.api`: the admin's and the REST API's extension points and shared parts.

Every name in these modules' `__all__` is supported; where each lives inside the queue (`jobs.application.*`,
`jobs.infrastructure.*`, `kernel.failures`) may change without notice, and an import contract
(docs/decisions/import-contracts.md) keeps other apps out of it. `jobs.domain.errors`, where the failure
classes lived until they moved to `kernel.failures`, stays a supported alias of the same classes, so handlers
written against it still load.
"""

from jobs.application.queue import InvalidJob, JobSpec, enqueue, enqueue_many
from jobs.public.handlers import (
    DeadLetter,
    JobContext,
    JobSnooze,
    batch_handler,
    job_handler,
    on_dead_letter,
    payload_check,
)
from kernel.failures import (
    AuthFailure,
    JobError,
    JobTimeout,
    NetworkFailure,
    PermanentError,
    RateLimited,
    RetryableError,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
)

__all__ = [
    "AuthFailure",
    "DeadLetter",
    "InvalidJob",
    "JobContext",
    "JobError",
    "JobSnooze",
    "JobSpec",
    "JobTimeout",
    "NetworkFailure",
    "PermanentError",
    "RateLimited",
    "RetryableError",
    "ServerFailure",
    "TimeoutFailure",
    "ValidationFailure",
    "batch_handler",
    "enqueue",
    "enqueue_many",
    "job_handler",
    "on_dead_letter",
    "payload_check",
]
