"""The queue's handler API: the one module code outside the queue imports to queue work and handle it.

    from jobs.public import JobContext, PermanentError, RetryableError, enqueue, job_handler

Every name here is supported; where each lives inside the queue (`jobs.application.*`, `kernel.failures`)
may change without notice. `jobs.domain.errors`, where the failure classes lived until they moved to
`kernel.failures`, stays a supported alias of the same classes, so handlers written against it still load.
"""

from jobs.application.context import JobContext
from jobs.application.queue import InvalidJob, JobSpec, enqueue, enqueue_many
from jobs.application.registry import DeadLetter, batch_handler, job_handler, on_dead_letter, payload_check
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
