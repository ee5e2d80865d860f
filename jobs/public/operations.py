"""What other apps do with the queue beyond queueing: an operator's overview, cancel and retry, finding the jobs
that carry a piece of work, the job states a caller reads, and the worker's services they plug into.

    from jobs.public.operations import cancel_pending_jobs, queue_overview

The queue's own admin and REST API call the same functions.
"""

from jobs.application.notifications import listening, notify, on_notification
from jobs.application.operations import (
    BulkOutcome,
    JobConflict,
    JobNotFound,
    cancel_pending_jobs,
    job_cancel,
    job_get,
    job_retry,
    jobs_carrying,
    register_stats_section,
)
from jobs.application.queue_counts import QueueOverview, queue_overview
from jobs.application.vacuum import register_tables
from jobs.domain.states import DEAD_LETTERS, JobStatus, failure_rate

__all__ = [
    "DEAD_LETTERS",
    "BulkOutcome",
    "JobConflict",
    "JobNotFound",
    "JobStatus",
    "QueueOverview",
    "cancel_pending_jobs",
    "failure_rate",
    "job_cancel",
    "job_get",
    "job_retry",
    "jobs_carrying",
    "listening",
    "notify",
    "on_notification",
    "queue_overview",
    "register_stats_section",
    "register_tables",
]
