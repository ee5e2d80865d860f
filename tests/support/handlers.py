"""Job handlers used by the queue's tests; workers load them through JOB_HANDLER_MODULES."""

import json
import os
import signal
import time
from typing import Any

from jobs.application.context import JobContext
from jobs.application.registry import job_handler
from kernel.failures import AuthFailure, RateLimited, ServerFailure, ValidationFailure

ERRORS = {
    "server": ServerFailure,
    "validation": ValidationFailure,
    "auth": AuthFailure,
    "value": ValueError,
}


def _record(path: str, **fields: Any) -> None:
    """Append one JSON line; O_APPEND writes of a line are atomic, so many processes may share the file."""
    line = (json.dumps(fields) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@job_handler("test.record")
def record(payload: dict[str, Any], job: JobContext) -> None:
    """Write when it started and finished, for counting runs and overlaps."""
    started = time.time()
    if payload.get("sleep"):  # not sleep(0): under libfaketime that fails with EINVAL
        time.sleep(payload["sleep"])
    _record(
        payload["path"],
        job=str(job.id),
        attempt=job.attempt_number,
        account=job.account_id,
        pid=os.getpid(),
        started=started,
        finished=time.time(),
        tag=payload.get("tag"),
    )


@job_handler("test.fail")
def fail(payload: dict[str, Any], job: JobContext) -> None:
    if "path" in payload:
        _record(payload["path"], job=str(job.id), attempt=job.attempt_number, at=time.time())
    if payload.get("succeed_on_attempt") == job.attempt_number:
        return
    if payload.get("kind") == "rate_limit":
        raise RateLimited("slow down", retry_after=payload.get("retry_after"))
    raise ERRORS[payload.get("kind", "server")](payload.get("message", "it failed"))


@job_handler("test.snooze")
def snooze(payload: dict[str, Any], job: JobContext) -> None:
    """Snooze `times` times (`seconds` each), then complete; every run is recorded, so a test counts them."""
    runs = sum(1 for r in read_records(payload["path"]) if r.get("job") == str(job.id))
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, at=time.time(), run=runs + 1)
    if runs < payload.get("times", 1):
        if payload.get("raise"):
            from jobs.public import JobSnooze

            raise JobSnooze(payload.get("seconds", 0), "raised")
        job.snooze(payload.get("seconds", 0), "not yet")
    if payload.get("then_fail"):
        raise ServerFailure("it failed after its snoozes")


@job_handler("test.kill_worker")
def kill_worker(payload: dict[str, Any], job: JobContext) -> None:
    """Kill the worker process running this job, every time (a poison job)."""
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, pid=os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


@job_handler("test.spin")
def spin(payload: dict[str, Any], job: JobContext) -> None:
    """Burn CPU in Python until stopped: the worker's timeout can interrupt this."""
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, event="start")
    deadline = time.monotonic() + payload.get("seconds", 60)
    while time.monotonic() < deadline:
        sum(range(1000))
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, event="end")


@job_handler("test.block")
def block(payload: dict[str, Any], job: JobContext) -> None:
    """Block in C (a sleep a Python exception cannot interrupt): only replacing the process stops it."""
    _record(
        payload["path"], job=str(job.id), attempt=job.attempt_number, event="start", pid=os.getpid(), at=time.time()
    )
    time.sleep(payload.get("seconds", 60))
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, event="end")


def read_records(path) -> list[dict[str, Any]]:
    try:
        with open(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


@job_handler("test.leak_transaction")
def leak_transaction(payload: dict[str, Any], job: JobContext) -> None:
    """A buggy handler: opens a transaction and never closes it."""
    from django.db import transaction

    transaction.atomic().__enter__()
    _record(payload["path"], job=str(job.id), event="leaked")


@job_handler("test.completes_then_rolls_back")
def completes_then_rolls_back(payload: dict[str, Any], job: JobContext) -> None:
    """Marks the job completed inside a transaction that then rolls back, and returns normally."""
    from django.db import transaction

    try:
        with transaction.atomic():
            job.mark_completed()
            raise RuntimeError("changed my mind")
    except RuntimeError:
        pass
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number)


@job_handler("test.sql_sleep")
def sql_sleep(payload: dict[str, Any], job: JobContext) -> None:
    """Stuck inside a SQL statement: only cancelling the query stops it."""
    from django.db import connection

    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, event="start")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(%s)", [payload.get("seconds", 60)])
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, event="end")


@job_handler("test.break_connection")
def break_connection(payload: dict[str, Any], job: JobContext) -> None:
    """The handler's database connection dies under it (a failover, a killed backend)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


@job_handler("test.cut_connections")
def cut_connections(payload: dict[str, Any], job: JobContext) -> None:
    """Every other connection to the database dies under the worker (a failover, a restart, a network blip):
    its queue connections with the rest. This handler's own connection and the test's (`spare`) live on."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND pid <> ALL(%s)",
            [payload.get("spare", [])],
        )
    _record(payload["path"], job=str(job.id), attempt=job.attempt_number, tag="cut", at=time.time())
    if payload.get("fail"):
        raise ServerFailure("the connection was cut on purpose")


@job_handler("test.needs_keys")
def needs_keys(payload: dict[str, Any], job: JobContext) -> None:
    """Reads its payload as handlers do: a missing key or a wrong type must fail at once, naming the key."""
    from jobs.application.payloads import require

    payload["name"]
    require(payload, "count", int)
