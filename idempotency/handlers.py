"""The idempotency app's job: forget expired keys (scheduled hourly by JOB_SCHEDULES in settings)."""

import logging
from typing import Any

from idempotency.application.services import purge_expired
from jobs.public import JobContext, job_handler

log = logging.getLogger("relay.api")


@job_handler("idempotency.purge")
def purge(payload: dict[str, Any], job: JobContext) -> None:
    deleted = purge_expired()
    log.info("forgot %d expired idempotency keys", deleted)
