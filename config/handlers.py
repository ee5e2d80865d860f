"""Jobs the composition root wires: the periodic work of apps that know nothing of the queue.

`idempotency` is a leaf the REST kernel (`api`) builds on; it imports no other app, the queue included
(docs/decisions/import-contracts.md). Its purge is a plain use case, put on the queue here, the one place
that knows both; settings add this module to JOB_HANDLER_MODULES and schedule the job hourly (JOB_SCHEDULES).
"""

import logging
from typing import Any

from idempotency.application.services import purge_expired
from jobs.public import JobContext, job_handler

log = logging.getLogger("relay.api")


@job_handler("idempotency.purge")
def purge(payload: dict[str, Any], job: JobContext) -> None:
    deleted = purge_expired()
    log.info("forgot %d expired idempotency keys", deleted)
