"""The worker's own behaviour, run in this process."""

import pytest

from jobs.application.worker import Worker
from jobs.application.worker.loop import Loop


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_loses_an_executor_stops_with_an_error_code(monkeypatch, caplog):
    def broken_executor(self, executor):
        return None  # the thread ends, as it would on a bug that escaped its loop

    monkeypatch.setattr(Loop, "run", broken_executor)
    worker = Worker(concurrency=2, install_signal_handlers=False)
    assert worker.run() == 1
    assert "lost an executor thread" in caplog.text


def _running_handler(worker: Worker):
    import threading
    import time
    import uuid

    from jobs.application.worker import Running
    from jobs.infrastructure.store import ClaimedJob

    job = ClaimedJob(uuid.uuid4(), "noop", {}, 1, 4, None, "default", 0, None)
    now = time.monotonic()
    running = Running(job, threading.get_ident(), None, now, now + 10, now + 12)
    worker.executors[0].running = running
    return running


@pytest.mark.parametrize(("cpu_used", "moved"), [(0.0, True), (4.0, False)], ids=["paused", "gil-hog"])
def test_a_late_tick_moves_the_deadlines_only_if_the_process_did_not_run(cpu_used, moved, caplog):
    """5 s between two ticks of the main thread: with no CPU used meanwhile the process was stopped (SIGSTOP)
    and its handlers' deadlines move on by the pause; with the CPU busy, a handler held the GIL: no pause."""
    import time

    worker = Worker(concurrency=1, install_signal_handlers=False)
    running = _running_handler(worker)
    deadline, hard = running.deadline, running.hard_deadline
    worker.deadlines.last_tick = time.monotonic() - 5.0
    worker.deadlines.last_cpu = time.process_time() - cpu_used
    worker.deadlines.notice_pause(0.1)
    shift = running.deadline - deadline
    assert running.hard_deadline - hard == pytest.approx(shift)
    if moved:
        assert 4.8 < shift < 5.2
        assert "was paused for" in caplog.text
    else:
        assert shift == 0
        assert "was paused" not in caplog.text


def test_an_ordinary_tick_moves_nothing():
    worker = Worker(concurrency=1, install_signal_handlers=False)
    running = _running_handler(worker)
    deadline = running.deadline
    worker.deadlines.notice_pause(0.1)
    assert running.deadline == deadline
