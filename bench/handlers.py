"""Handlers the benchmarks run (loaded by workers through JOB_HANDLER_MODULES=bench.handlers)."""

import os
import time
from typing import Any

from jobs.application.context import JobContext
from jobs.application.registry import job_handler


@job_handler("bench.latency")
def latency(payload: dict[str, Any], job: JobContext) -> None:
    """First thing: append `seq start-time` to the file, as the anchor benchmarks do."""
    started = time.time()
    fd = os.open(payload["path"], os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, f"{payload['seq']} {started!r}\n".encode())
    finally:
        os.close(fd)
