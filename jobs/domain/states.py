"""The job's life: seven states and the one table of moves between them."""

from datetime import datetime, timedelta
from enum import StrEnum

from kernel.failures import JobError


class JobStatus(StrEnum):
    PENDING = "pending"  # waiting for run_at, then for a worker
    RUNNING = "running"  # claimed by a worker, under a lease
    COMPLETED = "completed"
    RETRYING = "retrying"  # failed for a passing reason; due again at run_at
    FAILED = "failed"  # permanent error: retrying would not help
    DEAD = "dead"  # retries exhausted (or the lease passed on the last attempt)
    CANCELLED = "cancelled"


DUE_STATES = frozenset({JobStatus.PENDING, JobStatus.RETRYING})  # what a claim may pick
UNFINISHED_STATES = frozenset({JobStatus.PENDING, JobStatus.RUNNING, JobStatus.RETRYING})
FINISHED_STATES = frozenset(JobStatus) - UNFINISHED_STATES

# Why each move exists:
#   pending  -> running     a worker claims it
#   pending  -> cancelled   an operator cancels it before it ran
#   running  -> completed   the handler returned
#   running  -> retrying    a passing failure, attempts left
#   running  -> failed      a permanent failure
#   running  -> dead        a failure on the last attempt, or its lease passed on the last attempt
#   running  -> pending     graceful shutdown (uncounted), or its lease passed (counted)
#   retrying -> running     a worker claims it when due
#   retrying -> cancelled   an operator gives up on it
#   retrying -> pending     manual retry: run now, attempts reset
#   failed   -> pending     manual retry
#   dead     -> pending     manual retry
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED}),
    JobStatus.RUNNING: frozenset(
        {JobStatus.COMPLETED, JobStatus.RETRYING, JobStatus.FAILED, JobStatus.DEAD, JobStatus.PENDING}
    ),
    JobStatus.RETRYING: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.PENDING}),
    JobStatus.FAILED: frozenset({JobStatus.PENDING}),
    JobStatus.DEAD: frozenset({JobStatus.PENDING}),
    JobStatus.COMPLETED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}

CANCELLABLE = frozenset({JobStatus.PENDING, JobStatus.RETRYING})
MANUALLY_RETRYABLE = frozenset({JobStatus.DEAD, JobStatus.FAILED, JobStatus.RETRYING})
# Jobs that ended without succeeding because a failure made them (a permanent error, attempts spent, a deadline
# passed): what the failure rate counts.
GAVE_UP = frozenset({JobStatus.DEAD, JobStatus.FAILED})
# Dead letters: jobs that ended without their work being done (given up on, or cancelled by an operator), kept
# for an operator to look at (and the given-up ones to retry) unless JOB_DEAD_LETTER_RETENTION_DAYS is set; the
# dead-letter gauge counts them all. A cancelled job is one too: nothing ran it, and its payload may be the only
# record of what was wanted (seed 003).
DEAD_LETTERS = GAVE_UP | {JobStatus.CANCELLED}


def failure_rate(*, completed: int, failed: int, dead: int = 0) -> float | None:
    """(failed + dead) / (completed + failed + dead): the share of finished work that did not succeed.

    Cancelled work is left out (nobody wanted it any more). None before anything finished, rather than a 0 %
    that would read as "all well". Runs use it too (a run has no dead state: `dead` 0).
    """
    finished = completed + failed + dead
    return (failed + dead) / finished if finished else None


# Endings of a job that no handler raised, named where a failure must be (a cancelled Django task's error).
# Queue concepts, so here and not in the failure kernel; the tasks backend is their only reader.
class JobCancelled(JobError):
    """Stands for an operator's cancel."""


class LeaseExpired(JobError):
    """Stands for a worker that died holding the job (the stored error says `LeaseExpired: ...`)."""


class JobExpired(JobError):
    """Stands for a job that was not started before its deadline (`expires_at`): dead-lettered, never run."""


# Why a dead letter gave up, as the API, the admin and the stats name it. The queue writes an expired job's
# error itself (`JobExpired: ...`), so the prefix is the queue's own mark, not a handler's.
EXPIRED = "expired"
ATTEMPTS_EXHAUSTED = "attempts_exhausted"
PERMANENT = "permanent"
DEAD_LETTER_REASONS = (EXPIRED, ATTEMPTS_EXHAUSTED, PERMANENT)
EXPIRED_ERROR_PREFIX = f"{JobExpired.__name__}:"


def dead_letter_reason(status: JobStatus | str, error_message: str) -> str | None:
    """expired, attempts_exhausted or permanent for a dead letter; None for any other job."""
    if status == JobStatus.FAILED:
        return PERMANENT
    if status == JobStatus.DEAD:
        return EXPIRED if (error_message or "").startswith(EXPIRED_ERROR_PREFIX) else ATTEMPTS_EXHAUSTED
    return None


def pushed_expiry(expires_at: datetime | None, run_at: datetime, next_run_at: datetime) -> datetime | None:
    """The deadline after a retry the queue planned: the retry gets the window the job had after its due time.

    A job due at `run_at` with a deadline `expires_at` had `expires_at - run_at` to be started; its retry due at
    `next_run_at` gets the same (at least a second), so a long backoff never expires a job before its retry
    can run. The deadline never moves earlier. PostgreSQL's FAIL statement (jobs.infrastructure.store) is
    this rule in SQL.
    """
    if expires_at is None:
        return None
    window = max(expires_at - run_at, timedelta(seconds=1))
    return max(expires_at, next_run_at + window)


class IllegalJobTransition(Exception):
    """A move the table does not allow; the API answers 409."""

    def __init__(self, current: JobStatus, target: JobStatus, action: str | None = None) -> None:
        self.current = JobStatus(current)
        self.target = JobStatus(target)
        what = action or f"move to {self.target}"
        super().__init__(f"cannot {what} a job that is {self.current}")


def can_transition(current: JobStatus | str, target: JobStatus | str) -> bool:
    return JobStatus(target) in TRANSITIONS[JobStatus(current)]


def transition(current: JobStatus | str, target: JobStatus | str, action: str | None = None) -> JobStatus:
    """Return `target` if the table allows the move, else raise IllegalJobTransition."""
    if not can_transition(current, target):
        raise IllegalJobTransition(JobStatus(current), JobStatus(target), action)
    return JobStatus(target)


def check_cancel(current: JobStatus | str) -> JobStatus:
    return transition(current, JobStatus.CANCELLED, "cancel")


def check_manual_retry(current: JobStatus | str) -> JobStatus:
    if JobStatus(current) not in MANUALLY_RETRYABLE:
        raise IllegalJobTransition(JobStatus(current), JobStatus.PENDING, "retry")
    return transition(current, JobStatus.PENDING, "retry")
