"""The start/stop interface every maintenance service shares (jobs.application.maintenance.service): its own
thread, a pass every `every` seconds, failures survived, stop() waits for the pass in flight."""

from __future__ import annotations

import threading
import time

from jobs.application.maintenance.service import MaintenanceService, stop_all


class Passes(MaintenanceService):
    """A service whose passes are counted, and fail or block when told to."""

    name = "passes"

    def __init__(self, *, every: float = 0.01, fail: int = 0, block: threading.Event | None = None) -> None:
        super().__init__(every=every)
        self.passes = 0
        self.fail = fail  # how many passes fail first
        self.block = block  # a pass waits for it
        self.dropped = 0
        self.closed = 0
        self.retry_waits: list[float] = []
        self.threads: set[str] = set()

    def run_once(self) -> float | None:
        self.threads.add(threading.current_thread().name)
        self.passes += 1
        if self.block is not None:
            self.block.wait(5)
        if self.passes <= self.fail:
            raise ConnectionError("the database went away")
        return None

    def drop_connections(self) -> None:
        self.dropped += 1

    def close(self) -> None:
        self.closed += 1

    def retry_after(self, failures: int) -> float:
        self.retry_waits.append(failures)
        return 0.01


def _until(check, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_service_runs_a_pass_every_interval_in_a_thread_of_its_own_until_stopped():
    service = Passes()
    service.start()
    _until(lambda: service.passes >= 3)
    assert service.stop() is True
    assert not service.is_alive()
    assert service.threads == {"passes"}
    passes = service.passes
    time.sleep(0.05)
    assert service.passes == passes  # none after stop()
    assert service.closed == 1  # its connections are closed at its end, once


def test_a_failing_pass_is_logged_its_connections_dropped_and_the_service_carries_on(caplog):
    service = Passes(fail=2)
    service.start()
    _until(lambda: service.passes >= 4)
    service.stop()
    assert "passes failed, will retry: ConnectionError: the database went away" in caplog.text
    assert service.dropped == 2
    assert service.retry_waits == [1, 2]  # the wait grows with the failures in a row, then resets


def test_the_first_pass_is_known_to_have_ended_before_the_wait_after_it(caplog):
    """A worker waits for the limits' first pass before its first claim: a failed first pass must not make
    it wait for the retry (five minutes for the limits)."""

    class SlowRetry(Passes):
        def retry_after(self, failures: int) -> float:
            return 60.0

    service = SlowRetry(fail=1, every=60.0)
    service.start()
    assert service.first_pass.wait(2.0)
    started = time.monotonic()
    assert service.stop() is True
    assert time.monotonic() - started < 1.0  # stop() ends the wait at once


def test_stop_waits_for_the_pass_in_flight_within_its_timeout():
    release = threading.Event()
    service = Passes(block=release)
    service.start()
    _until(lambda: service.passes == 1)
    assert service.stop(timeout=0.1) is False  # still in its pass
    assert service.is_alive()
    release.set()
    assert service.stop() is True
    assert service.passes == 1


def test_stop_before_start_and_twice_is_harmless():
    service = Passes()
    assert service.stop() is True
    service = Passes()
    service.start()
    assert service.stop() is True
    assert service.stop() is True
    assert service.closed == 1


def test_a_pass_that_asks_for_more_at_once_does_not_wait():
    class Backlog(Passes):
        def run_once(self) -> float | None:
            super().run_once()
            return 0.0 if self.passes < 5 else None

    service = Backlog(every=60.0)
    service.start()
    _until(lambda: service.passes >= 5, seconds=1.0)
    service.stop()


def test_stop_all_asks_every_service_first_and_waits_for_all_within_one_timeout():
    release = threading.Event()
    stuck, quick = Passes(block=release), Passes()
    for service in (stuck, quick):
        service.start()
    _until(lambda: stuck.passes == 1)
    started = time.monotonic()
    assert stop_all([stuck, quick], timeout=0.2) == [stuck]
    assert time.monotonic() - started < 1.0
    assert not quick.is_alive()
    release.set()
    assert stuck.stop() is True
