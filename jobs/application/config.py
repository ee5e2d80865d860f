"""The queue's settings, read once into one typed object."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from jobs.domain.retry import RetryPolicy

# The queue's own statements (claims, acknowledgements, rescue, moves) run on private connections with these
# bounds, so they never hang a worker.
QUEUE_STATEMENT_TIMEOUT = 30.0
QUEUE_LOCK_TIMEOUT = 10.0
# After a lost connection a thread tries again after 0.2, 0.4, 0.8, 1.6, then every 2 s: a database that
# comes back is used within 2 s.
RECONNECT_MAX_SECONDS = 2.0


def reconnect_after(failures: int) -> float:
    """The wait before the next try after `failures` lost connections in a row."""
    return min(RECONNECT_MAX_SECONDS, 0.1 * 2**failures)


@dataclass(frozen=True)
class QueueConfig:
    poll_interval: float
    execution_timeout: float
    shutdown_grace: float
    retry: RetryPolicy
    concurrency: int
    batch_size: int
    retention_days: float | None
    dead_letter_retention_days: float | None
    metrics_interval: float = 30.0  # seconds between gauge counts across all workers; 0: off
    vacuum: bool = True  # the workers vacuum the queue's tables when autovacuum does not (jobs.domain.vacuum)

    @classmethod
    def from_settings(cls) -> QueueConfig:
        return cls(
            poll_interval=float(settings.JOB_POLL_INTERVAL),
            execution_timeout=float(settings.JOB_EXECUTION_TIMEOUT),
            shutdown_grace=float(settings.JOB_SHUTDOWN_GRACE),
            retry=RetryPolicy(
                max_attempts=int(settings.JOB_MAX_RETRIES) + 1,
                base_delay=float(settings.JOB_RETRY_DELAY_SECONDS),
                max_delay=float(settings.JOB_BACKOFF_MAX_SECONDS),
                jitter=float(settings.JOB_RETRY_JITTER),
            ),
            concurrency=int(settings.JOB_CONCURRENCY),
            batch_size=int(settings.JOB_BATCH_SIZE),
            retention_days=settings.JOB_RETENTION_DAYS,
            dead_letter_retention_days=settings.JOB_DEAD_LETTER_RETENTION_DAYS,
            metrics_interval=float(settings.JOB_METRICS_INTERVAL),
            vacuum=bool(settings.JOB_VACUUM),
        )

    @property
    def lease_margin(self) -> float:
        """Time between the execution timeout and the lease's end.

        Within it a worker stops an overrunning handler, records the failed
        attempt and, if the handler will not stop, replaces its own process,
        all before another worker may rescue the job.
        """
        return min(60.0, max(2.0, self.execution_timeout * 0.1))

    @property
    def lease_seconds(self) -> float:
        return self.execution_timeout + self.lease_margin
