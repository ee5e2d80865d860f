"""Relay as a backend of Django's tasks framework, held to the contract Django's own backends are tested with
(django/tests/tasks: test_immediate_backend, test_dummy_backend; django-tasks' database backend): statuses,
return values, errors, attempts, TaskContext, priority, queue_name, run_after, takes_context, signals,
get_result and refresh, run by a real worker."""

import datetime as dt
from pathlib import Path

import pytest
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.test import override_settings
from django.utils import timezone

from jobs.application.worker import Worker
from jobs.infrastructure.models import Job
from jobs.tasks_backend import RelayTaskBackend, UnstorableReturnValue
from tests.support import tasks as test_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def run_worker() -> None:
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()


@pytest.fixture
def fast_retries(settings):
    settings.JOB_RETRY_DELAY_SECONDS = 0
    settings.JOB_RETRY_JITTER = 0


def test_using_correct_backend():
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], RelayTaskBackend)
    assert default_task_backend.alias == "default"
    assert (default_task_backend.supports_defer, default_task_backend.supports_priority) == (True, True)
    assert default_task_backend.supports_get_result is default_task_backend.supports_async_task is True


@pytest.mark.parametrize("task", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task_then_it_runs(task):
    result = task.enqueue(1, two=3)
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert (result.started_at, result.finished_at, result.attempts) == (None, None, 0)
    assert (result.args, result.kwargs, result.task, result.backend) == ([1], {"two": 3}, task, "default")
    with pytest.raises(ValueError, match="Task has not finished yet"):
        _ = result.return_value
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY

    run_worker()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished is True
    assert result.started_at is not None
    assert result.finished_at is not None
    assert result.finished_at >= result.started_at >= result.enqueued_at
    assert result.return_value is None
    assert result.attempts == 1
    assert result.errors == []


def test_result_is_stored_with_the_job():
    result = test_tasks.calculate_meaning_of_life.enqueue()
    complex_ = test_tasks.calculate_meaning_of_life_async.enqueue()
    run_worker()
    assert default_task_backend.get_result(result.id).return_value == 42
    assert default_task_backend.get_result(complex_.id).return_value == {"answer": 42, "items": [1, "two"]}
    assert Job.objects.get(pk=result.id).result["return_value"] == 42


async def _aget(result_id):
    return await default_task_backend.aget_result(result_id)


def test_aget_result_and_arefresh():
    from asgiref.sync import async_to_sync

    result = test_tasks.calculate_meaning_of_life.enqueue()
    run_worker()
    fetched = async_to_sync(_aget)(result.id)
    assert (fetched.status, fetched.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    async_to_sync(result.arefresh)()
    assert result.return_value == 42


def test_a_failing_task_reports_its_error_by_the_stored_error_rule():
    result = test_tasks.failing_task_value_error.enqueue()
    run_worker()  # ValueError is unclassified, so retried: JOB_MAX_RETRIES + 1 attempts (no wait: see below)
    result = default_task_backend.get_result(result.id)
    assert result.status in (TaskResultStatus.READY, TaskResultStatus.FAILED)
    Job.objects.filter(pk=result.id).update(max_attempts=1, status="pending", attempt_number=0, run_at=timezone.now())
    run_worker()
    result = default_task_backend.get_result(result.id)
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value
    error = result.errors[-1]
    assert error.exception_class is ValueError
    assert error.traceback == "ValueError: This task failed due to ValueError at https://hooks.example.com"
    assert "SECRET" not in error.traceback
    assert "Traceback" not in error.traceback
    assert result.finished_at is not None


def test_a_return_value_that_cannot_be_stored_fails_the_task_at_once_with_a_clear_error():
    unstorable = test_tasks.complex_return_value.enqueue()
    nan = test_tasks.nan_return_value.enqueue()
    run_worker()
    for result in (unstorable, nan):
        result.refresh()
        assert result.status == TaskResultStatus.FAILED
        assert result.attempts == 1  # permanent: not retried
        assert result.errors[-1].exception_class is UnstorableReturnValue
    assert unstorable.errors[-1].traceback.startswith(
        "UnstorableReturnValue: the task's return value cannot be stored: a object is not JSON"
    )
    assert "float is not JSON" in nan.errors[-1].traceback or "a float" in nan.errors[-1].traceback


def test_attempts_errors_and_task_context_across_a_retry(tmp_path, fast_retries):
    path = str(tmp_path / "attempts.jsonl")
    result = test_tasks.flaky_with_context.enqueue(path)
    run_worker()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 2
    assert result.attempts == 2
    assert [e.exception_class_path for e in result.errors] == ["kernel.failures.ServerFailure"]
    assert result.errors[0].traceback == "ServerFailure: 503 the first time"
    seen = list(Path(path).read_text().splitlines())
    assert seen == [f'{{"attempt": 1, "id": "{result.id}"}}', f'{{"attempt": 2, "id": "{result.id}"}}']


def test_takes_context():
    result = test_tasks.get_task_id.enqueue()
    run_worker()
    result.refresh()
    assert result.return_value == result.id


def test_priority_maps_onto_the_queue_order(tmp_path):
    path = str(tmp_path / "order.txt")
    test_tasks.record_order.using(priority=-100).enqueue(path, "last")
    test_tasks.record_order.enqueue(path, "middle")
    top = test_tasks.record_order.using(priority=100).enqueue(path, "first")
    assert Job.objects.get(pk=top.id).priority == -100  # Django: higher first; Relay: lower first
    run_worker()
    assert [line.split()[0] for line in Path(path).read_text().splitlines()] == ["first", "middle", "last"]


def test_queue_name_is_the_jobs_queue_and_is_checked_against_the_backends_queues():
    result = test_tasks.noop_task.using(queue_name="reports").enqueue()
    assert Job.objects.get(pk=result.id).queue == "reports"
    with override_settings(
        TASKS={"default": {"BACKEND": "jobs.tasks_backend.RelayTaskBackend", "QUEUES": ["queue-1"]}}
    ):
        with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
            test_tasks.noop_task.using(queue_name="unknown_queue").enqueue()
        assert test_tasks.noop_task.using(queue_name="queue-1").enqueue().status == TaskResultStatus.READY


def test_run_after_defers_the_task():
    later = timezone.now() + dt.timedelta(hours=1)
    result = test_tasks.noop_task.using(run_after=later).enqueue()
    assert Job.objects.get(pk=result.id).run_at == later
    run_worker()
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        test_tasks.noop_task.using(run_after=dt.datetime(2030, 1, 1)).enqueue()


def test_the_signals_are_sent_enqueued_started_finished():
    seen = []

    def listener(signal_name):
        def receive(sender, task_result, **kwargs):
            seen.append((signal_name, task_result.id, task_result.status))

        return receive

    receivers = {
        task_enqueued: listener("enqueued"),
        task_started: listener("started"),
        task_finished: listener("finished"),
    }
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        result = test_tasks.calculate_meaning_of_life.enqueue()
        failed = test_tasks.complex_return_value.enqueue()
        run_worker()
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert [s for s in seen if s[1] == result.id] == [
        ("enqueued", result.id, TaskResultStatus.READY),
        ("started", result.id, TaskResultStatus.RUNNING),
        ("finished", result.id, TaskResultStatus.SUCCESSFUL),
    ]
    assert [s for s in seen if s[1] == failed.id][-1] == ("finished", failed.id, TaskResultStatus.FAILED)


def test_a_cancelled_task_is_failed_with_a_cancel_error():
    from jobs.application.operations import job_cancel

    result = test_tasks.noop_task.enqueue()
    job_cancel(job_id=result.id)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[-1].exception_class_path == "jobs.domain.states.JobCancelled"


def test_get_result_of_an_unknown_id_or_another_handler_does_not_exist():
    from jobs.application.queue import enqueue

    other = enqueue("noop", {})
    for result_id in ("123", "not-a-uuid", "01a23120-da65-7102-bf3e-1d023bce9b1a", str(other.pk)):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result_id)


def test_enqueue_joins_the_callers_transaction():
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        result = test_tasks.noop_task.enqueue()
        raise RuntimeError("roll back")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)
