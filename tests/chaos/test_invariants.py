"""The invariant checker itself, fed recorded histories: each invariant flags a planted fault, and passes the
correct histories that used to fool it (a claim handed back after a retry's failure, a loop in a graph
workflow). No workers: the histories are written here the way the queue and chaos.work write them, and, on
PostgreSQL, made by the real queue's statements and the real engine under the history trigger."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.application.queue import JobSpec, enqueue_many
from jobs.infrastructure.store import Finished, get_store
from tests.chaos import history
from tests.chaos.history import Change
from tests.chaos.invariants import (
    JobRow,
    Report,
    RunHistory,
    check_job_histories,
    check_jobs,
    check_pickup,
    check_run_histories,
    check_runs,
    check_tick_fires,
    check_worker_identities,
)
from tests.support import processes

LEASE = 5.0


class Story:
    """One job's life as the history trigger and chaos.work record it; times on the database's clock."""

    def __init__(self, job: str = "job-1", created: float = 1000.0) -> None:
        self.job = job
        self.status = "pending"
        self.attempt = 0
        self.worker = ""
        self.app = ""
        self.run_at: float | None = created
        self.failed_at: float | None = None
        self.delay: float | None = None
        self.lease_end: float | None = None
        self.created = created
        self.completed_at: float | None = None
        self.started_at: float | None = None
        self.changes: list[Change] = [
            Change(job, created, None, "pending", None, 0, "", "client", run_at=created, created_at=created)
        ]
        self.records: list[dict[str, Any]] = []

    def _change(self, at: float, status: str, *, app: str | None = None, error: str = "", **row: Any) -> Story:
        old_status, old_attempt = self.status, self.attempt
        for name, value in row.items():
            setattr(self, name, value)
        self.status = status
        self.changes.append(
            Change(
                self.job,
                at,
                old_status,
                status,
                old_attempt,
                self.attempt,
                self.worker,
                app if app is not None else self.app,
                run_at=self.run_at,
                failed_at=self.failed_at,
                retry_delay=self.delay,
                lease_end=self.lease_end,
                created_at=self.created,
                completed_at=self.completed_at,
                error=error,
                started_at=self.started_at,
            )
        )
        return self

    def claim(self, at: float, worker: str = "w1", app: str = "p1", lease: float = LEASE) -> Story:
        self.app = app
        self.started_at = at
        return self._change(at, "running", attempt=self.attempt + 1, worker=worker, lease_end=at + lease)

    def start(self, at: float, attempt: int | None = None, worker: str | None = None) -> Story:
        self.started_at = at  # what the attempt's end writes: when its handler began, on the database's clock
        self.records.append(
            {
                "event": "start",
                "job": self.job,
                "attempt": attempt or self.attempt,
                "worker": worker or self.worker,
                "db_start": at,
                "lease_end": self.lease_end,
            }
        )
        return self

    def end(self, at: float, outcome: str = "done", attempt: int | None = None, worker: str | None = None) -> Story:
        self.records.append(
            {
                "event": "end",
                "job": self.job,
                "attempt": attempt or self.attempt,
                "worker": worker or self.worker,
                "outcome": outcome,
                "db_end": at,
            }
        )
        return self

    def fail(self, at: float, delay: float = 0.5) -> Story:
        return self._change(at, "retrying", failed_at=at, delay=delay, run_at=at + delay, lease_end=None)

    def hand_back(self, at: float, delay: float = 0.0) -> Story:
        return self._change(at, "pending", attempt=self.attempt - 1, run_at=at + delay, lease_end=None)

    def rescue(self, at: float, app: str = "p2") -> Story:
        error = f"LeaseExpired: worker {self.worker} stopped before finishing attempt {self.attempt}"
        return self._change(at, "pending", app=app, error=error, failed_at=at, lease_end=None)

    def complete(self, at: float, app: str | None = None, stamped: float | None = None) -> Story:
        """`stamped`: the completed_at written (the handler's end, a moment before the write)."""
        return self._change(at, "completed", app=app, completed_at=stamped or at - 0.01, lease_end=None)

    def run(self, at: float, worker: str = "w1", app: str = "p1", took: float = 0.1) -> Story:
        """A whole attempt that succeeds: claimed, run, returned, acknowledged."""
        return self.claim(at, worker, app).start(at + 0.01).end(at + took).complete(at + took + 0.02)

    def row(self) -> JobRow:
        return JobRow(self.job, self.status, self.attempt, self.created, self.completed_at)


def check(*stories: Story, once: tuple[str, ...] = (), effects: dict | None = None, records: bool = True) -> Report:
    report = Report("planted")
    check_job_histories(
        report,
        job_ids=[s.job for s in stories],
        rows={s.job: s.row() for s in stories},
        changes={s.job: s.changes for s in stories},
        records=[r for s in stories for r in s.records] if records else None,
        lease_seconds=LEASE,
        once_ids=once,
        effects=effects or {},
    )
    return report


def broken(report: Report) -> set[str]:
    return {v.split(":")[0] for v in report.violations}


# --- correct histories pass ---------------------------------------------------------------------------------


def test_a_plain_run_a_retry_and_a_crash_rescued_after_its_lease_pass():
    plain = Story("plain").run(1000.1)
    retried = Story("retried").claim(1000.0).start(1000.01).end(1000.1, "failed").fail(1000.12, delay=0.5)
    retried.run(1000.7)
    killed = Story("killed").claim(1000.0).start(1000.01)  # kill -9: no end line, no change
    killed.rescue(1005.2).run(1005.3, worker="w2", app="p2")
    report = check(plain, retried, killed)
    assert report.violations == []
    assert report.figures["lease_rescues"] == 1
    assert report.figures["retries_checked"] == 1
    assert report.figures["attempts_cut_short"] == 1
    assert set(report.checked) == {"I1", "I2", "I3", "I4", "I5"}


def test_a_claim_handed_back_after_a_retry_rewrites_run_at_and_is_not_a_late_retry():
    """The false I5 failure of a full run: attempt 1 fails (due 0.5 s on), attempt 2 is claimed, a connection
    cut makes the worker hand it back unstarted (run_at is rewritten to the hand-back's now, the count goes
    back to 1), and attempt 2 runs later. The job's last row has run_at - failed_at far from the delay."""
    story = Story("handed-back").claim(1000.0).start(1000.01).end(1000.1, "failed").fail(1000.12, delay=0.5)
    story.claim(1000.7).hand_back(1003.0)
    story.run(1003.4, worker="w1")
    row = story.row()
    assert row.attempt == 2
    last = story.changes[-1]
    assert abs(last.run_at - last.failed_at - last.retry_delay) > 2  # what the old check read, and flagged
    report = check(story)
    assert report.violations == []
    assert report.figures["hand_backs"] == 1


def test_a_frozen_worker_returning_after_its_lease_passed_is_not_a_live_second_attempt():
    story = Story("frozen").claim(1000.0, "w1", "p1").start(1000.01)
    story.rescue(1005.1).claim(1005.2, "w2", "p2").start(1005.21)
    story.end(1007.0, attempt=1, worker="w1")  # the frozen handler returns: its ack is refused (no change)
    story.end(1007.3).complete(1007.32)
    report = check(story)
    assert report.violations == []
    assert report.figures["duplicate_deliveries"] == 1


def test_a_job_killed_between_its_claim_and_its_handler_is_checked_too():
    """No attempt record at all (killed before the handler's first line): the history still holds it."""
    story = Story("unrecorded").claim(1000.0).rescue(1003.0)  # early: its 5 s lease had not passed
    story.run(1003.1, worker="w2", app="p2")
    assert broken(check(story)) == {"I2"}


# --- a planted fault for each invariant -----------------------------------------------------------------------


def test_i1_flags_a_job_that_is_gone_or_did_not_finish():
    gone = Story("gone").run(1000.0)
    stuck = Story("stuck").claim(1000.0).start(1000.01).end(1000.1, "failed").fail(1000.12)
    report = Report("planted")
    check_job_histories(
        report,
        job_ids=["gone", "stuck"],
        rows={"stuck": stuck.row()},
        changes={"gone": gone.changes, "stuck": stuck.changes},
        records=gone.records + stuck.records,
        lease_seconds=LEASE,
    )
    assert broken(report) == {"I1"}
    assert report.figures["jobs_lost"] == 2


def test_i2_flags_a_claim_while_the_attempt_before_was_live():
    """A failure recorded while the handler still ran (a timeout written over a live attempt), and the retry
    claimed before the first attempt returned: two attempts live at once."""
    story = Story("overlap").claim(1000.0, "w1", "p1").start(1000.01)
    story.fail(1002.0, delay=0.05).claim(1002.1, "w2", "p2").start(1002.2).end(1002.3).complete(1002.4)
    story.end(1003.0, attempt=1, worker="w1")
    report = check(story)
    assert broken(report) == {"I2"}
    assert "while the attempt before was live" in report.violations[0]


def test_i2_flags_an_attempt_number_run_twice_and_an_attempt_no_claim_handed_out():
    twice = Story("twice").claim(1000.0).start(1000.01).start(1000.02).end(1000.1).complete(1000.2)
    orphan = Story("orphan").run(1000.0).start(1001.0, attempt=2, worker="w9")
    report = check(twice, orphan)
    assert {"I2", "I2/I4"} <= broken(report)


def test_i3_flags_a_completion_by_a_process_that_no_longer_held_the_job():
    story = Story("stale").claim(1000.0, "w1", "p1").start(1000.01)
    story.rescue(1005.1).claim(1005.2, "w2", "p2").start(1005.21)
    story.end(1006.0, attempt=1, worker="w1")
    story.complete(1006.1, app="p1")  # the frozen worker's acknowledgement went through
    assert broken(check(story)) == {"I3"}


def test_i3_flags_a_completion_before_its_attempt_returned_and_one_of_an_attempt_that_never_ran():
    early = Story("early").claim(1000.0).start(1000.01).complete(1000.05).end(1000.5)
    unrun = Story("unrun").claim(1000.0).complete(1000.05)
    report = check(early, unrun)
    assert broken(report) == {"I3"}
    assert len(report.violations) == 2


def test_i3_flags_an_exactly_once_effect_twice_or_from_a_stale_attempt():
    doubled = Story("doubled").claim(1000.0).start(1000.01).complete(1000.05).end(1000.06)
    stale = Story("stale").claim(1000.0).start(1000.01).rescue(1005.1)
    stale.claim(1005.2, "w2", "p2").start(1005.21).complete(1005.3, app="p2").end(1005.31)
    report = check(doubled, stale, once=("doubled", "stale"), effects={"doubled": [1, 1], "stale": [1]})
    assert broken(report) == {"I3"}
    assert report.figures["double_completions"] == 1
    assert any("not the completing attempt's" in v for v in report.violations)


def test_i4_flags_a_killed_attempts_number_used_again_and_a_started_attempt_handed_back():
    reused = Story("reused").claim(1000.0).start(1000.01).rescue(1005.1)
    reused.attempt = 0  # a bug: the claim after the crash counts attempt 1 again
    reused.run(1005.2, worker="w2", app="p2")
    handed = Story("handed").claim(1000.0).start(1000.01).hand_back(1000.5)
    handed.run(1000.6)
    report = check(reused, handed)
    assert broken(report) >= {"I4"}
    assert any("handed back uncounted" in v for v in report.violations)
    assert any("did not count a new attempt" in v for v in report.violations)


def test_i5_flags_a_lease_a_retry_and_a_failure_on_a_host_clock_two_minutes_off():
    lease = Story("lease").claim(1000.0, lease=LEASE + 120).start(1000.01).end(1000.1).complete(1000.2)
    retry = Story("retry").claim(1000.0).start(1000.01).end(1000.1, "failed")
    retry._change(1000.12, "retrying", failed_at=1000.12, delay=0.5, run_at=1000.12 + 120.5, lease_end=None)
    retry.run(1120.7)
    stamped = Story("stamped").claim(1000.0).start(1000.01).end(1000.1, "failed")
    stamped._change(1000.12, "retrying", failed_at=1120.12, delay=0.5, run_at=1120.62, lease_end=None)
    stamped.run(1120.7)
    report = check(lease, retry, stamped)
    assert broken(report) == {"I5"}
    assert len(report.violations) == 3


def test_i5_flags_completion_stamps_from_a_host_clock_two_minutes_off():
    fast = Story("fast").claim(1000.0).start(1000.01).end(1000.1).complete(1000.2, stamped=1120.1)
    slow = Story("slow").claim(1000.0).start(1000.01).end(1000.1)
    slow.started_at = 880.01  # an attempt's start stamped by a host two minutes behind
    slow.complete(1000.2)
    report = check(fast, slow)
    assert broken(report) == {"I5"}
    assert "started_at/completed_at lie outside their attempt" in report.violations[0]
    assert len(report.violations[0].split("(e.g.")[1].split("), (")) == 2


def test_i5_flags_a_claim_before_the_job_was_due():
    story = Story("early").claim(1000.0).start(1000.01).end(1000.1, "failed").fail(1000.12, delay=30)
    story.run(1001.0)
    assert broken(check(story)) == {"I5"}


def test_i6_flags_a_tick_fired_twice_early_or_never():
    due = {"2026-12-01T10:00:00+00:00": 1796119200.0, "2026-12-01T10:01:00+00:00": 1796119260.0}
    report = Report("ticks")
    check_tick_fires(report, [("2026-12-01T10:00:00+00:00", 1796119200.01)], due=due)
    assert broken(report) == {"I6"}  # the second tick never fired
    twice = Report("ticks")
    fires = [("2026-12-01T10:00:00+00:00", 1796119200.01), ("2026-12-01T10:00:00+00:00", 1796119200.02)]
    check_tick_fires(twice, fires, due={"2026-12-01T10:00:00+00:00": 1796119200.0})
    assert any("more than once" in v for v in twice.violations)
    early = Report("ticks")
    check_tick_fires(early, [("2026-12-01T10:01:00+00:00", 1796119140.0)], due={})  # 2 min early: a host clock
    assert any("before they were due" in v for v in early.violations)
    fine = Report("ticks")
    check_tick_fires(fine, [("2026-12-01T10:00:00+00:00", 1796119200.3)], due={"2026-12-01T10:00:00+00:00": 0})
    assert fine.violations == []


def test_i7_flags_a_job_claimed_later_than_the_poll_allows():
    slow = Story("slow").run(1003.5)
    quick = Story("quick", created=1000.0).run(1000.4)
    report = Report("pickup")
    changes = {"slow": slow.changes, "quick": quick.changes}
    check_pickup(report, changes, {"slow": 1000.0, "quick": 1000.0}, within=3.0)
    assert broken(report) == {"I7"}
    assert report.figures["pickup_max_seconds"] == 3.5
    never = Report("pickup")
    check_pickup(never, {"quick": quick.changes}, {"quick": 1000.0, "lost": 1000.0}, within=3.0)
    assert any("never claimed" in v for v in never.violations)


def test_i8_flags_a_reused_id_and_claims_under_ids_their_process_did_not_log():
    logs = {"p1": "worker w1 started: ...\n", "p2": "worker w2 started: ...\n"}
    fine = Story("fine").run(1000.0, "w1", "p1")
    good = Report("ids")
    check_worker_identities(good, logs, fine.records, {"fine": fine.changes})
    assert good.violations == []
    reused = Report("ids")
    check_worker_identities(reused, {**logs, "p3": "worker w1 started: ...\n"}, fine.records, {})
    assert any("used by two starts" in v for v in reused.violations)
    ghost = Story("ghost").run(1000.0, "w9", "p1")
    unknown = Report("ids")
    check_worker_identities(unknown, logs, ghost.records, {"ghost": ghost.changes})
    assert len(unknown.violations) == 2  # its attempt and its claim
    swapped = Story("swapped").run(1000.0, "w2", "p1")  # p1 claimed under p2's id
    elsewhere = Report("ids")
    check_worker_identities(elsewhere, logs, swapped.records, {"swapped": swapped.changes})
    assert any("another process logged" in v for v in elsewhere.violations)
    stranger = Story("stranger").run(1000.0, "w1", "p9")
    unopened = Report("ids")
    check_worker_identities(unopened, logs, stranger.records, {"stranger": stranger.changes})
    assert any("none of the workers opened" in v for v in unopened.violations)


# The loop of tests/integration/workflows/test_graph_steps.py: ping -> count -> again (branch) -> mark ->
# pause (wait) -> ping ... -> again -> end.
LOOP_TARGETS = {
    "ping": frozenset({"count"}),
    "count": frozenset({"again"}),
    "again": frozenset({"mark"}),
    "mark": frozenset({"pause"}),
    "pause": frozenset({"ping"}),
}
LOOP_PATH = ["ping", "count", "again", "mark", "pause", "ping", "count", "again"]


def loop_run(log: list[tuple[str, str]], path: list[str] = LOOP_PATH, run_id: str = "run-1") -> RunHistory:
    return RunHistory(run_id, "completed", path, "", log, "ping", LOOP_TARGETS)


def check_loop(*runs: RunHistory, stranded: tuple = ()) -> Report:
    report = Report("runs")
    check_run_histories(report, runs, run_ids=[r.id for r in runs], stranded=stranded, expect="completed")
    return report


def test_i9_passes_a_loop_in_a_graph_workflow_and_a_retried_step():
    log = [(key, "succeeded") for key in LOOP_PATH]
    log.insert(5, ("ping", "retrying"))  # the second visit of ping needed two attempts
    report = check_loop(loop_run(log))
    assert report.violations == []
    assert report.figures["loop_visits"] == 3


def test_i9_flags_a_step_run_again_after_its_visit_was_recorded_succeeded():
    log = [(key, "succeeded") for key in LOOP_PATH]
    log.insert(2, ("ping", "succeeded"))  # a stale step job ran ping's first visit again, after count
    report = check_loop(loop_run(log))
    assert broken(report) == {"I9"}
    assert "visit 1" in report.violations[0]


def test_i9_flags_a_step_recorded_twice_in_a_row_where_the_graph_has_no_loop():
    path = ["ping", "count", "count", "again"]
    report = check_loop(loop_run([(key, "succeeded") for key in path], path=path))
    assert broken(report) == {"I9"}
    assert "does not join" in report.violations[0]


def test_i9_flags_a_stranded_run_and_i1_a_run_that_did_not_end():
    stuck = RunHistory("run-2", "active", ["ping"], "count", [("ping", "succeeded")], "ping", LOOP_TARGETS)
    report = check_loop(loop_run([(k, "succeeded") for k in LOOP_PATH]), stuck, stranded=(("run-2", "active"),))
    assert broken(report) == {"I1", "I9"}


# --- on PostgreSQL: histories the real queue and the real engine write ---------------------------------------


@pytest.fixture
def recorded(transactional_db) -> Iterator[str]:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the history trigger is PostgreSQL's")
    url = processes.test_database_url()
    history.install(url)
    yield url
    history.remove(url)


def _run_real_queue_through_a_retry_and_a_hand_back(url: str) -> tuple[list, Report]:
    store = get_store()
    (job_id,) = enqueue_many([JobSpec("test.record", {"path": "/dev/null"})])
    (claimed,) = store.claim("chaos-w1", None, 1, LEASE)
    assert store.fail(
        "chaos-w1", job_id, 1, status="retrying", error="ServerFailure: x", delay=0.2, started=time.time()
    )
    time.sleep(0.5)
    (claimed,) = store.claim("chaos-w1", None, 1, LEASE)
    assert store.release("chaos-w1", [job_id]) == [job_id]  # handed back unstarted: run_at rewritten
    (claimed,) = store.claim("chaos-w1", None, 1, LEASE)
    assert claimed.attempt_number == 2
    assert store.complete("chaos-w1", [Finished(job_id, 2, time.time(), time.time())]) == {job_id}
    report = Report("real queue")
    check_jobs(report, url, job_ids=[job_id], records=None, lease_seconds=LEASE)
    return [job_id], report


@pytest.mark.postgres
def test_the_real_queues_retry_and_hand_back_pass_and_the_old_reading_of_run_at_would_not(recorded):
    import psycopg

    [job_id], report = _run_real_queue_through_a_retry_and_a_hand_back(recorded)
    assert report.violations == []
    assert report.figures["hand_backs"] == 1
    assert report.figures["retries_checked"] == 1
    with psycopg.connect(recorded, autocommit=True) as connection:
        (off,) = connection.execute(
            "SELECT extract(epoch FROM run_at - failed_at) - retry_delay_seconds FROM jobs_job WHERE id = %s",
            [job_id],
        ).fetchone()
    assert off > 0.05  # the last row's run_at is the hand-back's: the old I5 flagged this correct queue


@pytest.mark.postgres
def test_a_retry_written_on_a_host_clock_is_flagged_from_the_real_history(recorded):
    import psycopg

    store = get_store()
    (job_id,) = enqueue_many([JobSpec("test.record", {"path": "/dev/null"})])
    store.claim("chaos-w1", None, 1, LEASE)
    with psycopg.connect(recorded, autocommit=True) as connection:  # a FAIL that read the host's clock, 2 min fast
        connection.execute(
            "UPDATE jobs_job SET status = 'retrying', failed_at = now() + interval '120 s',"
            " run_at = now() + interval '120.5 s', retry_delay_seconds = 0.5, lease_expires_at = NULL"
            " WHERE id = %s",
            [job_id],
        )
    report = Report("planted on the real queue")
    check_jobs(report, recorded, job_ids=[job_id], records=None, lease_seconds=LEASE, expect="retrying")
    assert broken(report) == {"I5"}
    assert any("failures stamped off the database's clock" in v for v in report.violations)


@pytest.mark.postgres
def test_a_real_loop_through_a_wait_passes_i9_and_a_step_logged_again_is_flagged(recorded, settings):
    from tests.factories import AccountFactory, ContactFactory
    from tests.integration.workflows.support import end_wait_now, make_workflow, run_due_jobs
    from workflows.application.runs.starting import start_run
    from workflows.infrastructure.models import ExecutionLog

    account = AccountFactory()
    contact = ContactFactory(account=account)
    tag = lambda key, value, **extra: {"key": key, "action_type": "add_tag", "config": {"tag": value}, **extra}  # noqa: E731
    steps = [
        tag("ping", "pinged"),
        tag("count", "counted"),
        {
            "key": "again",
            "action_type": "branch",
            "config": {
                "branches": [
                    {
                        "name": "Once more",
                        "conditions": [{"field": "tags", "op": "not_contains", "value": "twice"}],
                        "next": "mark",
                    }
                ],
                "default": "$end",
            },
        },
        tag("mark", "twice", next="pause"),
        {"key": "pause", "action_type": "wait", "config": {"duration": 3600}, "next": "ping"},
    ]
    run = start_run(workflow_id=make_workflow(account, steps).pk, contact_id=contact.pk).execution
    run_due_jobs()
    end_wait_now(run.pk)
    run_due_jobs()
    logged = list(ExecutionLog.objects.filter(execution=run).order_by("id").values_list("step_key", "step_index"))
    assert [key for key, _ in logged].count("ping") == 2  # a loop: the old check (by step index) flagged it

    report = Report("real loop")
    check_runs(report, recorded, run_ids=[run.pk])
    assert report.violations == []
    assert report.figures["loop_visits"] == 3

    first_count = ExecutionLog.objects.filter(execution=run, step_key="count").order_by("id").first()
    first_count.pk = None  # planted: count's first visit logged again, after the run had finished it
    first_count.save()
    planted = Report("planted loop")
    check_runs(planted, recorded, run_ids=[run.pk])
    assert broken(planted) == {"I9"}
