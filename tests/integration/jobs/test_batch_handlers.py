"""Batch handlers: the worker gives a handler's jobs claimed together to its batch handler in one call.

The worker runs in this process (burst mode), so the handlers below, registered here, are the ones it
calls. Each job's payload says what the batch handler does with it:

    complete  completed with `complete_all` (in a transaction that commits), a follow-up queued
    leave     returned, so the worker runs it through the ordinary handler
    ignore    neither: the worker acknowledges it

and `fail` on any job of the batch makes the handler raise: "inside" (in its transaction, after
`complete_all`: everything rolls back) or "after" (once its completions committed); `spin` burns CPU
past the execution timeout after committing its completions, and `block` sleeps past it in C, which no
interruption stops (a runaway).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import pytest
from django.db import transaction
from prometheus_client.parser import text_string_to_metric_families

from jobs.application import metrics
from jobs.application.context import JobContext, complete_all, context_for
from jobs.application.queue import JobSpec, enqueue, enqueue_many
from jobs.application.registry import batch_handler, get_batch_handler, job_handler
from jobs.application.worker import Worker
from jobs.infrastructure.database import is_split
from jobs.infrastructure.store import get_store
from jobs.models import Job
from kernel.failures import LeaseLost

# A claim commits on its own, and the worker runs on its own connections: these tests commit.
pytestmark = pytest.mark.django_db(transaction=True)

HANDLER = "test.batchable"
QUEUE = "batch"  # the worker below claims only this queue
LATER = "batch-later"  # follow-ups go here, so the worker leaves them pending for the test to read

_lock = threading.Lock()
batch_calls: list[list[str]] = []  # the tags each call of the batch handler got (sorted: a claim has no order)
single_calls: list[tuple[str, int]] = []  # (tag, attempt) of each job the ordinary handler ran


@job_handler(HANDLER)
def run_one(payload: dict[str, Any], job: JobContext) -> None:
    with _lock:
        single_calls.append((payload["tag"], job.attempt_number))


@job_handler("test.complete_then_block")
def complete_then_block(payload: dict[str, Any], job: JobContext) -> None:
    """Completes its job (committed), then blocks in C past the timeout: a runaway whose job is done."""
    with transaction.atomic():
        job.mark_completed()
    time.sleep(4)


@batch_handler(HANDLER)
def run_together(items: Sequence[tuple[dict[str, Any], JobContext]]) -> list[tuple[dict[str, Any], JobContext]]:
    with _lock:
        batch_calls.append(sorted(payload["tag"] for payload, _job in items))
    fail = next((payload["fail"] for payload, _job in items if "fail" in payload), None)
    completing = [(payload, job) for payload, job in items if payload["mode"] == "complete"]
    if fail == "steal":  # another worker rescued the first job meanwhile (committed, as a rescue would be)
        Job.objects.filter(pk=completing[0][1].id).update(worker_id="elsewhere")
    with transaction.atomic():
        complete_all(
            [job for _payload, job in completing],
            [JobSpec("noop", {"after": payload["tag"]}, queue=LATER) for payload, _job in completing],
        )
        if fail == "inside":
            raise RuntimeError("the batch gives up inside its transaction")
    if fail == "after":
        raise RuntimeError("the batch gives up after its completions committed")
    if fail == "block":
        time.sleep(4)  # in C: the worker declares the handler a runaway and replaces its process
    if fail == "spin":
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # interruptible Python: the worker's timeout stops it
            sum(range(1000))
    return [(payload, job) for payload, job in items if payload["mode"] == "leave"]


@pytest.fixture(autouse=True)
def _fresh_calls():
    batch_calls.clear()
    single_calls.clear()
    yield
    batch_calls.clear()
    single_calls.clear()


def queue_jobs(*modes: str, **extra: Any) -> dict[str, UUID]:
    """One job per mode, tagged by position and mode (e.g. "0-complete"); `extra` goes in every payload."""
    specs = [
        JobSpec(HANDLER, {"tag": f"{i}-{mode}", "mode": mode, **extra}, queue=QUEUE) for i, mode in enumerate(modes)
    ]
    jobs = enqueue_many(specs)
    return {spec.payload["tag"]: job_id for spec, job_id in zip(specs, jobs, strict=True)}


def run_worker() -> None:
    worker = Worker(queues=[QUEUE], concurrency=1, burst=True, install_signal_handlers=False)
    assert worker.run() == 0


def jobs_by_tag(ids: dict[str, UUID]) -> dict[str, Job]:
    return {tag: Job.objects.get(pk=job_id) for tag, job_id in ids.items()}


def follow_ups() -> list[str]:
    return sorted(job.payload["after"] for job in Job.objects.filter(queue=LATER))


def test_the_batch_handler_is_registered_apart_from_the_ordinary_one():
    assert get_batch_handler(HANDLER) is run_together
    assert get_batch_handler("noop") is None


def test_jobs_claimed_together_go_to_the_batch_handler_in_one_call():
    ids = queue_jobs("complete", "leave", "ignore", "complete", "leave")
    run_worker()
    assert batch_calls == [["0-complete", "1-leave", "2-ignore", "3-complete", "4-leave"]]
    # Only what it returned ran one by one, once each, on the same attempt.
    assert sorted(single_calls) == [("1-leave", 1), ("4-leave", 1)]
    jobs = jobs_by_tag(ids)
    assert {tag: (job.status, job.attempt_number) for tag, job in jobs.items()} == dict.fromkeys(ids, ("completed", 1))
    assert all(job.completed_at is not None for job in jobs.values())
    # The follow-ups of the jobs it completed were queued with them, once each, and only theirs.
    assert follow_ups() == ["0-complete", "3-complete"]
    assert set(Job.objects.filter(queue=LATER).values_list("status", flat=True)) == {"pending"}


def test_one_job_of_the_handler_runs_through_the_ordinary_handler():
    ids = queue_jobs("complete")
    run_worker()
    assert batch_calls == []
    assert single_calls == [("0-complete", 1)]
    assert Job.objects.get(pk=ids["0-complete"]).status == "completed"
    assert follow_ups() == []


def test_when_the_batch_handler_raises_inside_its_transaction_every_job_runs_one_by_one():
    ids = queue_jobs("complete", "leave", "ignore", fail="inside")
    run_worker()
    assert batch_calls == [["0-complete", "1-leave", "2-ignore"]]
    assert sorted(single_calls) == [("0-complete", 1), ("1-leave", 1), ("2-ignore", 1)]
    assert {job.status for job in jobs_by_tag(ids).values()} == {"completed"}
    assert {job.attempt_number for job in jobs_by_tag(ids).values()} == {1}  # not counted as a failed attempt
    assert follow_ups() == []  # the batch's completion and follow-up rolled back together


def test_when_the_batch_handler_raises_after_committing_only_the_jobs_not_completed_run_again():
    ids = queue_jobs("complete", "leave", "ignore", "complete", fail="after")
    run_worker()
    assert batch_calls == [["0-complete", "1-leave", "2-ignore", "3-complete"]]
    # The completed ones committed: running them again would run them twice.
    assert sorted(single_calls) == [("1-leave", 1), ("2-ignore", 1)]
    assert {job.status for job in jobs_by_tag(ids).values()} == {"completed"}
    assert follow_ups() == ["0-complete", "3-complete"]


def test_a_batch_past_the_execution_timeout_records_a_failure_for_each_job_it_did_not_complete(settings):
    settings.JOB_EXECUTION_TIMEOUT = 1.0
    settings.JOB_RETRY_DELAY_SECONDS = 3600  # the retry stays in the future: the burst worker leaves it
    ids = queue_jobs("complete", "leave", "ignore", fail="spin")
    started = time.monotonic()
    run_worker()
    assert time.monotonic() - started < 20  # interrupted, not left to spin its 30 s
    assert batch_calls == [["0-complete", "1-leave", "2-ignore"]]
    assert single_calls == []  # a timeout is a failed attempt, not a reason to run them one by one
    jobs = jobs_by_tag(ids)
    assert jobs["0-complete"].status == "completed"
    for tag in ("1-leave", "2-ignore"):
        assert jobs[tag].status == "retrying", tag
        assert jobs[tag].attempt_number == 1
        assert jobs[tag].error_message.startswith("JobTimeout: handler exceeded JOB_EXECUTION_TIMEOUT")
    assert follow_ups() == ["0-complete"]


class _Replaced(Exception):
    """Stands for the worker replacing its process (os.execv) or leaving it (os._exit): not in the test's."""


@pytest.mark.parametrize("batch", [True, False], ids=["batch", "one job"])
def test_a_runaway_whose_jobs_completed_counts_each_attempt_once_as_a_success(settings, monkeypatch, batch):
    """The handler committed its completions, then blocked past its timeout: the worker declares it a runaway,
    finds nothing to record (the job is no longer running) and restarts. Each attempt is counted once, by what
    the database holds: successes, nothing retried or dead-lettered."""
    settings.JOB_EXECUTION_TIMEOUT = 1.0  # lease margin 2 s: a runaway 1.7 s in, well before the 4 s sleep ends

    def replaced(*args: Any) -> None:
        raise _Replaced

    monkeypatch.setattr(os, "execv", replaced)
    monkeypatch.setattr(os, "_exit", replaced)
    metrics.recorder.take()  # what earlier tests counted in this process
    before = _stored_attempts()
    if batch:
        ids = queue_jobs("complete", "complete", "complete", fail="block")
    else:
        ids = {"one": enqueue("test.complete_then_block", {}, queue=QUEUE).id}
    worker = Worker(queues=[QUEUE], concurrency=1, burst=True, install_signal_handlers=False)
    with pytest.raises(_Replaced):
        worker.run()
    for executor in worker.executors:
        executor.join(10)  # the handler returned (a replaced process would have counted nothing more)
    metrics.flush()  # what it counted after the worker's own last flush
    assert batch_calls == ([["0-complete", "1-complete", "2-complete"]] if batch else [])
    assert {job.status for job in jobs_by_tag(ids).values()} == {"completed"}
    counted = {outcome: n - before.get(outcome, 0) for outcome, n in _stored_attempts().items()}
    assert counted == {"succeeded": len(ids)}


def _stored_attempts() -> dict[str, float]:
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            if sample.name == "relay_jobs_attempts_total" and sample.value:
                found[sample.labels["outcome"]] = sample.value
    return found


# --- complete_all, against the store ----------------------------------------------------------
WORKER = "batch-test-worker"


def claimed_contexts(count: int) -> list[JobContext]:
    store = get_store()
    claimed = store.claim(WORKER, [QUEUE], count, 60)
    assert len(claimed) == count
    return [context_for(job, store, WORKER) for job in claimed]


@pytest.mark.skipif(is_split(), reason="the queue apart resolves a unique key's holder when the outbox is moved")
def test_complete_all_completes_each_job_and_queues_its_follow_up_in_order():
    queue_jobs("complete", "complete", "complete")
    holder = enqueue("noop", {"after": "already queued"}, queue=LATER, unique_key="only-one")
    jobs = claimed_contexts(3)
    with transaction.atomic():
        next_ids = complete_all(
            jobs,
            [
                JobSpec("noop", {"after": "first"}, queue=LATER),
                None,
                JobSpec("noop", {"after": "third"}, queue=LATER, unique_key="only-one"),
            ],
        )
        assert not any(job.completed_in_transaction for job in jobs)  # only once it commits
    assert all(job.completed_in_transaction for job in jobs)
    assert next_ids[1] is None
    assert Job.objects.get(pk=next_ids[0]).payload == {"after": "first"}
    assert next_ids[2] == holder.pk  # the unfinished job holding the key keeps its place
    assert follow_ups() == ["already queued", "first"]
    assert {j.status for j in Job.objects.filter(pk__in=[job.id for job in jobs])} == {"completed"}


def test_complete_all_with_one_lease_lost_queues_nothing_and_raises():
    queue_jobs("complete", "complete", "complete")
    jobs = claimed_contexts(3)
    Job.objects.filter(pk=jobs[1].id).update(worker_id="another-worker")  # rescued and claimed elsewhere
    with transaction.atomic():
        with pytest.raises(LeaseLost, match=str(jobs[1].id)) as info:
            complete_all(jobs, [JobSpec("noop", {"after": str(i)}, queue=LATER) for i in range(3)])
        assert str(jobs[0].id) not in str(info.value)
        # Nothing queued even before the caller's transaction rolls back: the statement itself refused.
        assert follow_ups() == []
        transaction.set_rollback(True)
    assert follow_ups() == []
    assert not any(job.completed_in_transaction for job in jobs)
    statuses = dict(Job.objects.filter(pk__in=[job.id for job in jobs]).values_list("id", "status"))
    assert statuses == {job.id: "running" for job in jobs}  # the others are still held, to run one by one


def test_complete_all_of_a_job_already_completed_raises():
    queue_jobs("complete", "complete")
    jobs = claimed_contexts(2)
    with transaction.atomic():
        complete_all([jobs[0]], [None])
    with transaction.atomic():
        with pytest.raises(LeaseLost):
            complete_all(jobs, [None, JobSpec("noop", {"after": "second"}, queue=LATER)])
        assert follow_ups() == []
        transaction.set_rollback(True)
    assert Job.objects.get(pk=jobs[1].id).status == "running"


def test_a_job_whose_lease_the_batch_lost_is_not_run_again_here_the_others_are():
    ids = queue_jobs("complete", "complete", "leave", fail="steal")
    run_worker()
    assert len(batch_calls) == 1
    jobs = jobs_by_tag(ids)
    stolen = next(job for job in jobs.values() if job.worker_id == "elsewhere")
    ran = sorted(tag for tag, _attempt in single_calls)
    assert len(ran) == 2
    assert stolen.payload["tag"] not in ran  # its attempt belongs to the worker that has it now
    assert stolen.status == "running"
    assert {job.status for job in jobs.values() if job.pk != stolen.pk} == {"completed"}
    assert follow_ups() == []  # complete_all queued nothing: all or nothing
