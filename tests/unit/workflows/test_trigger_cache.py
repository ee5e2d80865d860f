"""The worker's cache of which workflows an event starts: trusted only while told of every change, and never long."""

from __future__ import annotations

from uuid import UUID

from workflows.application.trigger_cache import TriggerCache

V1 = UUID(int=1)
V2 = UUID(int=2)
KEY = ("tag.added", "vip")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Database:
    """Stands for the candidates query: counts how often the cache asks it."""

    def __init__(self, answer: list[tuple[int, UUID]]) -> None:
        self.answer = answer
        self.reads = 0

    def load(self) -> list[tuple[int, UUID]]:
        self.reads += 1
        return list(self.answer)


def cache(*, trusted: bool = True, max_age: float = 30.0, clock: Clock | None = None) -> TriggerCache:
    return TriggerCache(trusted=lambda: trusted, max_age=max_age, clock=clock or Clock())


def test_an_untrusted_cache_reads_the_database_every_time():
    """No listener (web process, SQLite, a listener that is down): nothing tells it of changes."""
    triggers, db = cache(trusted=False), Database([(1, V1)])
    for _ in range(3):
        assert triggers.lookup(7, KEY, db.load) == [(1, V1)]
    assert db.reads == 3
    assert triggers.get(7, KEY)[0] is None  # and keeps nothing


def test_a_trusted_cache_reads_once():
    triggers, db = cache(), Database([(1, V1)])
    assert triggers.lookup(7, KEY, db.load) == [(1, V1)]
    assert triggers.lookup(7, KEY, db.load) == [(1, V1)]
    assert db.reads == 1


def test_a_notification_for_the_account_drops_its_answers_only():
    triggers, db = cache(), Database([(1, V1)])
    triggers.lookup(7, KEY, db.load)
    triggers.lookup(8, KEY, db.load)
    db.answer = [(1, V2)]
    triggers.forget("7")
    assert triggers.lookup(7, KEY, db.load) == [(1, V2)]
    assert triggers.lookup(8, KEY, db.load) == [(1, V1)]  # another account's answer stays
    assert db.reads == 3


def test_a_reconnection_or_an_unreadable_payload_drops_everything():
    for payload in (None, "not-an-account"):
        triggers, db = cache(), Database([(1, V1)])
        triggers.lookup(7, KEY, db.load)
        triggers.lookup(8, KEY, db.load)
        triggers.forget(payload)
        triggers.lookup(7, KEY, db.load)
        triggers.lookup(8, KEY, db.load)
        assert db.reads == 4


def test_an_answer_read_before_a_notification_is_not_stored_after_it():
    triggers = cache()
    found, generation = triggers.get(7, KEY)
    assert found is None
    triggers.forget("7")  # a publish committed while we read the old answer
    triggers.put(7, KEY, [(1, V1)], generation)
    assert triggers.get(7, KEY)[0] is None


def test_an_answer_expires_even_while_trusted():
    """A notification lost on a half-open connection leaves a cache stale for at most max_age."""
    clock = Clock()
    triggers, db = cache(max_age=30.0, clock=clock), Database([(1, V1)])
    triggers.lookup(7, KEY, db.load)
    clock.now += 29.0
    triggers.lookup(7, KEY, db.load)
    assert db.reads == 1
    db.answer = []
    clock.now += 2.0
    assert triggers.lookup(7, KEY, db.load) == []
    assert db.reads == 2
    clock.now += 29.0
    triggers.lookup(7, KEY, db.load)  # the fresh answer is kept for its own max_age
    assert db.reads == 2


def test_the_max_age_comes_from_settings(settings):
    settings.WORKFLOW_TRIGGER_CACHE_MAX_AGE = 5.0
    clock = Clock()
    triggers, db = TriggerCache(trusted=lambda: True, clock=clock), Database([(1, V1)])
    triggers.lookup(7, KEY, db.load)
    clock.now += 6.0
    triggers.lookup(7, KEY, db.load)
    assert db.reads == 2


def test_the_app_wires_the_process_cache_to_the_worker_s_channel():
    """WorkflowsConfig.ready() registers it (importing the module does not): a notification reaches it."""
    from jobs.application.notifications import deliver
    from workflows.application.trigger_cache import TRIGGERS_CHANNEL, trigger_cache

    _, generation = trigger_cache.get(7, KEY)
    trigger_cache.put(7, KEY, [(1, V1)], generation)
    try:
        assert trigger_cache.get(7, KEY)[0] == [(1, V1)]
        deliver(TRIGGERS_CHANNEL, "7")
        assert trigger_cache.get(7, KEY)[0] is None
    finally:
        trigger_cache.forget(None)
