"""Django's tasks framework on Relay's queue.

    TASKS = {"default": {"BACKEND": "jobs.tasks_backend.RelayTaskBackend"}}

    @task(priority=10)
    def rebuild_index(name): ...
    rebuild_index.enqueue("contacts")

Each Task becomes a `django_task` job: durable, retried with the queue's
backoff, run by `runworker`. Django's priority (higher first, -100..100) maps
onto the queue's (lower first). Results report status and times; return
values are not kept.
"""

from __future__ import annotations

from typing import Any

from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils.module_loading import import_string

from jobs.application.context import JobContext
from jobs.application.queue import enqueue
from jobs.application.registry import job_handler
from jobs.domain.states import JobStatus
from jobs.infrastructure.models import Job

HANDLER = "django_task"

_STATUS = {
    JobStatus.PENDING: TaskResultStatus.READY,
    JobStatus.RETRYING: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    JobStatus.FAILED: TaskResultStatus.FAILED,
    JobStatus.DEAD: TaskResultStatus.FAILED,
    JobStatus.CANCELLED: TaskResultStatus.FAILED,
}


class RelayTaskBackend(BaseTaskBackend):
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.queues = set(params.get("QUEUES", []))  # empty: any queue name

    def enqueue(self, task, args, kwargs) -> TaskResult:
        self.validate_task(task)
        job = enqueue(
            HANDLER,
            {"task": task.module_path, "args": list(args), "kwargs": dict(kwargs), "backend": self.alias},
            queue=task.queue_name,
            priority=-task.priority,
            run_at=task.run_after,
        )
        return task_result(task, job, self.alias)

    def get_result(self, result_id: str) -> TaskResult:
        try:
            job = Job.objects.get(pk=result_id, handler=HANDLER)
        except (Job.DoesNotExist, ValueError, TypeError):
            raise TaskResultDoesNotExist(result_id) from None
        task = import_string(job.payload["task"])
        return task_result(task, job, self.alias)


def task_result(task, job: Job, alias: str) -> TaskResult:
    """The job seen as a Django TaskResult."""
    status = _STATUS[JobStatus(job.status)]
    finished = job.completed_at or (job.failed_at if status == TaskResultStatus.FAILED else None)
    return TaskResult(
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
        errors=[],
        worker_ids=[job.worker_id] if job.worker_id else [],
    )


@job_handler(HANDLER)
def run_django_task(payload: dict[str, Any], job: JobContext) -> None:
    task = import_string(payload["task"])
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    if task.takes_context:
        result = Job.objects.get(pk=job.id)
        context: TaskContext[Any, Any] = TaskContext(
            task_result=task_result(task, result, payload.get("backend", "default"))
        )
        task.call(context, *args, **kwargs)
    else:
        task.call(*args, **kwargs)
