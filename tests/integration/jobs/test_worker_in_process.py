"""The worker's own behaviour, run in this process."""

import pytest

from jobs.application.worker import Worker


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_loses_an_executor_stops_with_an_error_code(monkeypatch, caplog):
    def broken_executor(self, executor):
        return None  # the thread ends, as it would on a bug that escaped its loop

    monkeypatch.setattr(Worker, "_executor", broken_executor)
    worker = Worker(concurrency=2, install_signal_handlers=False)
    assert worker.run() == 1
    assert "lost an executor thread" in caplog.text
