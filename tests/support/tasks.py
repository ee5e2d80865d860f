"""Django tasks (`@task`) for the tasks-backend tests: module-level, as the framework requires."""

import json
import os
import time
from pathlib import Path

from django.tasks import TaskContext, task

from kernel.failures import ServerFailure


@task()
def noop_task(*args, **kwargs) -> None:
    return None


@task()
async def noop_task_async(*args, **kwargs) -> None:
    return None


@task()
def calculate_meaning_of_life() -> int:
    return 42


@task()
async def calculate_meaning_of_life_async() -> dict:
    return {"answer": 42, "items": [1, "two"]}


@task()
def failing_task_value_error() -> None:
    raise ValueError("This task failed due to ValueError at https://hooks.example.com/T0/SECRET")


@task()
def complex_return_value() -> object:
    return object()  # not JSON


@task()
def nan_return_value() -> float:
    return float("nan")


@task(takes_context=True)
def get_task_id(context: TaskContext) -> str:
    return context.task_result.id


@task(takes_context=True)
def flaky_with_context(context: TaskContext, path: str) -> int:
    """Fails (retryably) on the first attempt; records each attempt's context."""
    with open(path, "a") as fh:
        fh.write(json.dumps({"attempt": context.attempt, "id": context.task_result.id}) + "\n")
    if context.attempt == 1:
        raise ServerFailure("503 the first time")
    return context.attempt


@task()
def record_order(path: str, name: str) -> None:
    with Path(path).open("a") as fh:
        fh.write(f"{name} {os.getpid()} {time.time()}\n")
