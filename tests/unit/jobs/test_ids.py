"""Job ids (uuid7): newest first is the primary key read backwards, so ids must hold their creation time."""

import datetime as dt
import threading
import uuid

import jobs.domain.ids as ids
from jobs.domain.ids import uuid7, uuid7_floor, uuid7_time


def test_ids_made_by_one_process_only_grow_even_within_one_millisecond():
    made = [uuid7() for _ in range(20_000)]  # far more than one per millisecond
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert {(u.version, u.variant) for u in made} == {(7, uuid.RFC_4122)}


def test_ids_keep_growing_when_the_clock_steps_back(monkeypatch):
    first = uuid7()
    monkeypatch.setattr(ids.time, "time_ns", lambda: 0)  # 1970
    later = uuid7()
    assert later > first
    assert (later.version, later.variant) == (7, uuid.RFC_4122)


def test_a_full_random_field_carries_into_the_time_and_stays_a_valid_uuid7(monkeypatch):
    full = uuid7().int | ids._RANDOM  # every random bit set
    monkeypatch.setattr(ids, "_last", full)
    monkeypatch.setattr(ids.time, "time_ns", lambda: 0)  # the clock cannot move it on
    following = uuid7()
    assert following.int > full
    assert following.int >> 80 == (full >> 80) + 1  # the next millisecond
    assert (following.version, following.variant) == (7, uuid.RFC_4122)


def test_threads_never_make_the_same_id():
    made: list[uuid.UUID] = []

    def make() -> None:
        made.extend(uuid7() for _ in range(5_000))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 20_000


def test_an_id_holds_its_time_and_a_floor_bounds_the_ids_made_since():
    now = dt.datetime.now(dt.UTC)
    made = uuid7()
    assert abs(uuid7_time(made) - now.timestamp()) < 1
    assert uuid7_floor(now - dt.timedelta(seconds=1)) < made
    assert uuid7_floor(now + dt.timedelta(seconds=1)) > made
    back_then = uuid7(at=(now - dt.timedelta(days=10)).timestamp())
    assert uuid7_floor(now - dt.timedelta(days=10, seconds=1)) < back_then < uuid7_floor(now - dt.timedelta(days=9))
