"""Writing a job handler: register it by name, read its payload, settle what it held when it gives up.

    from jobs.public.handlers import JobContext, job_handler, require

    @job_handler("send_digest")
    def send_digest(payload: dict, job: JobContext) -> None:
        user = require(payload, "user", int)   # InvalidPayload (permanent) when missing or of the wrong kind

`jobs.public` re-exports the names most handlers need; this module has the rest of the registration API
(batch handlers and their items, completing many jobs at once, the payload readers), and `RetryPolicy`, the
queue's backoff formula, for a handler that retries its own work with its own numbers (a workflow step).
"""

from jobs.application.context import JobContext, complete_all
from jobs.application.payloads import InvalidPayload, MissingPayloadKey, require, require_uuid
from jobs.application.registry import (
    BatchItem,
    DeadLetter,
    batch_handler,
    job_handler,
    on_dead_letter,
    payload_check,
)
from jobs.domain.retry import RetryPolicy
from jobs.domain.snooze import MAX_SNOOZE_SECONDS, InvalidSnooze, JobSnooze

__all__ = [
    "MAX_SNOOZE_SECONDS",
    "BatchItem",
    "DeadLetter",
    "InvalidPayload",
    "InvalidSnooze",
    "JobContext",
    "JobSnooze",
    "MissingPayloadKey",
    "RetryPolicy",
    "batch_handler",
    "complete_all",
    "job_handler",
    "on_dead_letter",
    "payload_check",
    "require",
    "require_uuid",
]
