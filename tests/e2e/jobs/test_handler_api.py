"""A handler module written against the old path of the failure classes (`jobs.domain.errors`) loads in a real
worker through JOB_HANDLER_MODULES, registers, and its errors are treated as before."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.domain.states import JobStatus
from jobs.models import Job
from jobs.public import enqueue
from tests.support import legacy_handlers  # noqa: F401 - registers legacy.outcome here too: enqueue checks names

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LEGACY = {
    "JOB_HANDLER_MODULES": "tests.support.legacy_handlers",
    "JOB_RETRY_DELAY_SECONDS": "0",
    "JOB_RETRY_JITTER": "0",
}


def test_a_handler_module_on_the_old_error_path_loads_registers_and_runs(start_worker):
    ok = enqueue("legacy.outcome", {"kind": "none"})
    permanent = enqueue("legacy.outcome", {"kind": "permanent"})
    limited = enqueue("legacy.outcome", {"kind": "rate_limited"})
    flaky = enqueue("legacy.outcome", {"kind": "retryable", "succeed_on_attempt": 2})

    worker = start_worker("--burst", **LEGACY)
    assert worker.proc.wait(60) == 0, worker.output()
    assert "Traceback" not in worker.output()

    def job(j) -> Job:
        return Job.objects.get(pk=j.pk)

    assert (job(ok).status, job(ok).attempt_number) == (JobStatus.COMPLETED, 1)
    assert (job(permanent).status, job(permanent).error_message) == (JobStatus.FAILED, "PermanentError: not this one")
    rate_limited = job(limited)
    assert (rate_limited.status, rate_limited.error_message) == (JobStatus.RETRYING, "RateLimited: slow down")
    assert rate_limited.run_at > timezone.now() + timedelta(minutes=50)  # its Retry-After, not the 0 s backoff
    assert (job(flaky).status, job(flaky).attempt_number) == (JobStatus.COMPLETED, 2)
