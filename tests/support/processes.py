"""Real `runworker` processes for end-to-end tests, pointed at the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connections

ROOT = Path(__file__).resolve().parents[2]


def test_database_url(alias: str = "default") -> str:  # noqa: PT028 - a helper, not a test
    """The URL of a database this test run uses (pytest-django's test database for `alias`)."""
    connection = connections[alias]
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] or ""
    if s["PASSWORD"]:
        auth += f":{s['PASSWORD']}"
    host = s["HOST"] or "localhost"
    port = f":{s['PORT']}" if s["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{s['NAME']}"


def worker_env(**overrides: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": test_database_url(), "PYTHONUNBUFFERED": "1", "DEBUG": "false"}
    if "jobs" in settings.DATABASES:  # the queue in its own database: the worker uses its test database too
        env["JOBS_DATABASE_URL"] = test_database_url("jobs")
    env.setdefault("SECRET_KEY", "test-secret-key-for-worker-processes")
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class WorkerProcess:
    """One `manage.py runworker` in its own process group; its output goes to a log file."""

    def __init__(self, *args: str, log_path: Path, **env: str) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "runworker", *args],
            cwd=ROOT,
            env=worker_env(**env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 20) -> None:
        wait_until(lambda: text in self.output(), timeout, f"worker output to contain {text!r}")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()
        return self.proc.returncode


def wait_until[T](predicate: Callable[[], T], timeout: float = 20, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
