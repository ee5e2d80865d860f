"""Django's tasks framework on Relay's queue.

    TASKS = {"default": {"BACKEND": "jobs.tasks_backend.RelayTaskBackend"}}

    @task(priority=10)
    def rebuild_index(name): ...
    result = rebuild_index.enqueue("contacts")      # joins the caller's transaction, like enqueue()
    rebuild_index.get_result(result.id).status        # READY, RUNNING, SUCCESSFUL or FAILED

Each Task becomes a `django_task` job: durable, retried with the queue's backoff, run by `runworker`.

- Priority: Django's -100..100 (higher first) is negated onto the queue's order (lower first), so 100 runs
  before 0 before -100; `queue_name` is the job's queue (checked against QUEUES when the backend sets them);
  `run_after` is its due time; async task functions run through async_to_sync.
- Statuses: pending and retrying -> READY, running -> RUNNING, completed -> SUCCESSFUL, failed, dead and
  cancelled -> FAILED.
- The return value is stored with the job (`Job.result`), in the transaction that marks it completed; one
  that JSON cannot hold (or PostgreSQL could not store: NaN, NUL) fails the task at once with
  UnstorableReturnValue naming its type.
- Errors: one TaskError per failed attempt, `exception_class_path` the exception's class and `traceback` its
  stored form (`Type: message`, the queue's rule: one line, URLs cut to scheme and host, at most 1,000
  characters; never a stack trace, which may quote secrets). `attempts` counts the job's attempts, and
  TaskContext.attempt is the current one.
- Signals: task_enqueued when queued, task_started before each attempt, task_finished when the task is
  finished (succeeded, or failed for good: a failure the queue will retry returns the task to READY).
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from jobs.application.context import JobContext
from jobs.application.payloads import InvalidPayload, require
from jobs.application.queue import enqueue
from jobs.application.registry import job_handler
from jobs.domain.states import JobCancelled, JobStatus, LeaseExpired
from jobs.infrastructure.database import queue_atomic
from jobs.infrastructure.models import Job
from kernel.failures import JobError, PermanentError, classify, format_error, stored_error

HANDLER = "django_task"
KEPT_ERRORS = 20  # errors of the latest attempts a result keeps

_STATUS = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.RETRYING: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.FAILED: TaskResultStatus.FAILED,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}


class UnstorableReturnValue(PermanentError):
    """The task returned something the job cannot keep: failing at once, since it would return it again."""


class RelayTaskBackend(BaseTaskBackend):
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.queues = set(params.get("QUEUES", []))  # empty: any queue name (the queue has no fixed list)

    def enqueue(self, task, args, kwargs) -> TaskResult:
        self.validate_task(task)
        job = enqueue(
            HANDLER,
            {
                "task": task.module_path,
                "args": normalize_json(list(args)),
                "kwargs": normalize_json(dict(kwargs)),
                "backend": self.alias,
                "takes_context": task.takes_context,
            },
            queue=task.queue_name,
            priority=-task.priority,
            run_at=task.run_after,
        )
        result = task_result(task, job, self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            job = Job.objects.get(pk=UUID(str(result_id)), handler=HANDLER)
        except (Job.DoesNotExist, ValueError, TypeError):
            raise TaskResultDoesNotExist(result_id) from None
        try:
            task = import_string(job.payload["task"])
        except (ImportError, KeyError):
            raise TaskResultDoesNotExist(f"{result_id}: its task function no longer exists") from None
        return task_result(task, job, self.alias)


def _path(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def task_result(task, job: Job, alias: str, *, running_attempt: int | None = None) -> TaskResult:
    """The job seen as a Django TaskResult (`running_attempt`: as its handler sees it while it runs)."""
    status = TaskResultStatus.RUNNING if running_attempt else _STATUS[JobStatus(job.status)]
    kept = job.result or {}
    errors = [
        TaskError(exception_class_path=e["exception_class_path"], traceback=stored_error(e["message"]))
        for e in kept.get("errors", [])
    ]
    if status == TaskResultStatus.FAILED and not _last_is_recorded(job, kept):
        # A failure the handler did not see: an operator cancelled it, its worker died holding it (the lease
        # passed), or it could not start (its payload, its function).
        if job.status == JobStatus.CANCELLED:
            cause, message = _path(JobCancelled), "JobCancelled: the job was cancelled"
        elif job.error_message.startswith("LeaseExpired"):
            cause, message = _path(LeaseExpired), job.error_message
        else:
            cause, message = _path(JobError), job.error_message or "JobError: the job gave up"
        errors.append(TaskError(exception_class_path=cause, traceback=stored_error(message)))
    attempts = running_attempt or job.attempt_number
    workers = list(kept.get("workers", []))[:attempts]
    workers += [job.worker_id or "unknown"] * (attempts - len(workers))
    finished = None
    if status == TaskResultStatus.SUCCESSFUL:
        finished = job.completed_at
    elif status == TaskResultStatus.FAILED:
        finished = job.cancelled_at if job.status == JobStatus.CANCELLED else job.failed_at
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=str(job.id),
        status=status,
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=finished,
        last_attempted_at=job.started_at,
        args=job.payload.get("args", []),
        kwargs=job.payload.get("kwargs", {}),
        backend=alias,
        errors=errors,
        worker_ids=workers,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", kept.get("return_value"))
    return result


def _last_is_recorded(job: Job, kept: dict[str, Any]) -> bool:
    """Whether the handler recorded the failure of the job's latest attempt itself."""
    return bool(kept.get("errors")) and kept["errors"][-1].get("attempt") == job.attempt_number


def storable(value: Any) -> Any:
    """The return value as JSON the job can keep, or UnstorableReturnValue saying why not."""
    try:
        normalized = normalize_json(value)
        text = json.dumps(normalized, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UnstorableReturnValue(
            f"the task's return value cannot be stored: a {type(value).__name__} is not JSON ({format_error(exc)})"
        ) from None
    if "\\u0000" in text:
        raise UnstorableReturnValue("the task's return value cannot be stored: it holds a NUL character")
    return normalized


@job_handler(HANDLER)
def run_django_task(payload: dict[str, Any], job: JobContext) -> None:
    try:
        task = import_string(require(payload, "task", str))
    except ImportError:
        raise InvalidPayload("task", "names no importable task function") from None
    args, kwargs = require(payload, "args", list), require(payload, "kwargs", dict)
    row = Job.objects.get(pk=job.id)
    alias = payload.get("backend", "default")
    kept = dict(row.result or {})
    kept["workers"] = [*kept.get("workers", [])[: job.attempt_number - 1], job.worker_id]
    running = task_result(task, _with(row, kept), alias, running_attempt=job.attempt_number)
    task_started.send(RelayTaskBackend, task_result=running)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        kept["return_value"] = storable(value)
    except Exception as exc:
        error_path = f"{type(exc).__module__}.{type(exc).__qualname__}"
        errors = [*kept.get("errors", []), {"exception_class_path": error_path, "message": format_error(exc)}]
        errors[-1]["attempt"] = job.attempt_number
        kept["errors"] = errors[-KEPT_ERRORS:]
        kept.pop("return_value", None)
        Job.objects.filter(pk=job.id).update(result=kept)
        if not classify(exc).retryable or job.is_last_attempt:
            row = _with(row, kept, status=JobStatus.FAILED)
            row.failed_at = timezone.now()
            task_finished.send(RelayTaskBackend, task_result=task_result(task, row, alias))
        raise
    with queue_atomic():
        Job.objects.filter(pk=job.id).update(result=kept)
        job.mark_completed()
    row = Job.objects.get(pk=job.id)
    task_finished.send(RelayTaskBackend, task_result=task_result(task, row, alias))


def _with(row: Job, kept: dict[str, Any], status: str | None = None) -> Job:
    row.result = kept
    if status is not None:
        row.status = status
    return row
