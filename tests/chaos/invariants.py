"""The invariants I1-I9 of issue #14, checked after a scenario from what the database and the handler recorded.

Every check reads what happened, never what the code meant to do: each job's history of row changes
(tests/chaos/history.py: a trigger stamps every claim, hand-back, rescue, failure and completion with the
database's clock and the writing process), the rows of `jobs_job`, `chaos_effect` and the workflow tables, the
lines `chaos.work` wrote for each attempt (tests/chaos/handlers.py), and the workers' own logs. Reading is
apart from checking: `check_jobs` reads a scenario's jobs and hands them to `check_job_histories`, which
takes plain data, so tests/chaos/test_invariants.py can feed it recorded histories with a planted fault and
see each invariant fail. A check adds a sentence to `violations` for each breach, counts the cases it
examined in `checked`, and puts its numbers in `figures`; a scenario asserts there are no violations and
publishes the figures (tests/chaos/README.md).

- I1 no committed job disappears: every id enqueue returned is a row that reached the end the scenario expects.
- I2 at most one live attempt per job at any moment: a job is claimed again only after the attempt before
  returned or its lease passed (whichever came first; all on the database's clock), a lease is taken back
  only once it passed, and no attempt number runs twice.
- I3 a stale worker cannot finalise a job: a completion is written by the process that holds the job's last
  attempt, after that attempt ran (and, at-least-once, returned); an exactly-once effect exists once and is
  the completing attempt's.
- I4 a crash counts the attempt: every claim counts a new attempt; only a claim handed back unstarted gives
  its number back; the job's count is its last claim's.
- I5 lease and due times come from the database's clock: each lease ends within the lease length of the
  database's time at its claim, an attempt's started_at and completed_at lie between its claim and the write
  that ended it, a retry is due exactly its delay after the failure the database recorded, no
  claim comes before the job was due (as the row said at that moment: a hand-back rewrites the due time) or
  before it was created.
- I6 one cron fire per tick: no tick has two jobs, none fired before it was due, every tick that came due fired.
- I7 NOTIFY is a hint, polling guarantees pickup: with notifications lost, each job is still claimed within
  the poll interval (and a slack for a loaded machine) of its commit.
- I8 each worker start has a unique identity: the ids the workers logged at start are all different, and
  every claim and attempt ran under one of them, the one its own process logged.
- I9 a workflow run never runs a step again once that visit was recorded succeeded, and never stops in
  ACTIVE, QUEUED or WAITING with no unfinished job to move it. Steps are matched by key and visit along the
  run's recorded path (a loop through a wait visits a step again, legitimately), and each move on the path is
  one the workflow's graph allows.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import psycopg

from tests.chaos import history
from tests.chaos.history import Change

EPSILON = 0.05  # seconds: clock reads of one server, a few statements apart
# A change's own time stamps (statement_timestamp(), as the queue writes them) precede the trigger's clock
# reading by at most the statement's run time so far: seconds on a loaded machine, never two minutes.
STATEMENT_SLACK = 5.0
HAND_BACK_DELAY_MAX = 2.0  # a hand-back is due at once, or 2 s on (a worker shutting down, jobs still running)
RETRY_DUE_TOLERANCE = 0.01  # run_at and failed_at come from one statement: their difference is the delay
STARTED = re.compile(r"worker (\S+) started: ")
ADVANCING = ("succeeded", "skipped")  # the outcomes that finish a step's visit (the run moves on)


@dataclass
class Report:
    scenario: str
    figures: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)  # invariant -> cases examined

    def breach(self, invariant: str, what: str, examples: Iterable[Any] = ()) -> None:
        shown = list(examples)[:5]
        self.violations.append(f"{invariant}: {what}" + (f" (e.g. {shown})" if shown else ""))

    def none_of(self, invariant: str, found: Sequence[Any], what: str) -> None:
        """A breach of `invariant` if anything was found: "<how many> <what>", with a few examples."""
        if found:
            self.breach(invariant, f"{len(found)} {what}", found)

    def check(self, invariant: str, cases: int = 1) -> None:
        self.checked[invariant] += cases

    def broken(self, invariant: str) -> bool:
        return any(v.startswith(f"{invariant}:") or v.startswith(f"{invariant}/") for v in self.violations)

    def assert_held(self) -> None:
        assert not self.violations, f"{self.scenario}: invariants broken:\n" + "\n".join(self.violations)


def _rows(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(sql, params).fetchall()


# --- jobs: I1-I5 -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    """A job's row at the end of the scenario."""

    id: str
    status: str
    attempt: int
    created_at: float
    completed_at: float | None = None


@dataclass
class Hold:
    """One claim of a job: from the claim to the change that ended it, with the attempt the handler ran."""

    claim: Change
    exit: Change | None = None
    start: dict[str, Any] | None = None  # chaos.work's start line for this claim, if it ran
    end: dict[str, Any] | None = None  # and its end line, if it returned

    @property
    def attempt(self) -> int:
        return self.claim.attempt

    @property
    def lease_end(self) -> float:
        return self.claim.lease_end if self.claim.lease_end is not None else math.inf

    def live_until(self) -> float:
        """Until when its handler counted as live: until it returned or its lease passed, whichever first."""
        if self.start is None:
            return -math.inf  # never started (handed back, or killed before its handler began)
        returned = self.end["db_end"] if self.end is not None else math.inf
        return min(self.lease_end, returned)


def attempts_by_job(records: Iterable[dict[str, Any]]) -> dict[str, dict[int, dict[str, list[dict]]]]:
    """job -> attempt -> {"start": [...], "end": [...]} from chaos.work's lines."""
    found: dict[str, dict[int, dict[str, list[dict]]]] = defaultdict(
        lambda: defaultdict(lambda: {"start": [], "end": []})
    )
    for record in records:
        if record.get("event") in ("start", "end"):
            found[record["job"]][record["attempt"]][record["event"]].append(record)
    return found


def holds_of(changes: Sequence[Change]) -> list[Hold]:
    holds: list[Hold] = []
    for change in changes:
        kind = change.kind
        if kind == "claim":
            holds.append(Hold(change))
        elif change.old_status == "running" and change.status != "running" and holds and holds[-1].exit is None:
            holds[-1].exit = change
    return holds


def _attach_records(
    job_id: str, holds: list[Hold], by_attempt: Mapping[int, Mapping[str, list[dict]]]
) -> tuple[list, list]:
    """Give each start and end line to the claim it ran under (same attempt and worker; after a hand-back
    and a claim again by the same worker, the later claim). Returns (lines no claim handed out, numbers run
    twice)."""
    orphans, twice = [], []
    for number, lines in by_attempt.items():
        if len(lines["start"]) > 1:
            twice.append((job_id, number, len(lines["start"])))
        for kind in ("start", "end"):
            for line in lines[kind]:
                at = line["db_start"] if kind == "start" else None
                candidates = [
                    h
                    for h in holds
                    if h.attempt == number
                    and h.claim.worker == line["worker"]
                    and (at is None or h.claim.at <= at + EPSILON)
                ]
                if kind == "end":
                    candidates = [h for h in candidates if h.start is not None] or candidates
                if not candidates:
                    orphans.append((job_id, number, kind, line["worker"]))
                    continue
                setattr(candidates[-1], kind, line)
    return orphans, twice


def check_job_histories(
    report: Report,
    *,
    job_ids: Sequence[Any],
    rows: Mapping[str, JobRow],
    changes: Mapping[str, Sequence[Change]],
    records: list[dict[str, Any]] | None,
    lease_seconds: float,
    once_ids: Iterable[Any] = (),
    effects: Mapping[str, Sequence[int]] | None = None,
    expect: str = "completed",
) -> None:
    """I1-I5 over these jobs' histories. `records`: chaos.work's lines, or None for a handler that keeps
    none (then what needs them, a handler's start and return, is not checked). `effects`: the attempts that
    committed each exactly-once job's effect."""
    ids = [str(i) for i in job_ids]
    exactly_once = {str(i) for i in once_ids}
    effects = effects or {}

    # I1: every committed job is there, and ended as expected.
    missing = [i for i in ids if i not in rows]
    unfinished = [i for i in ids if i in rows and rows[i].status != expect]
    report.check("I1", len(ids))
    report.figures["jobs"] = len(ids)
    report.figures["jobs_lost"] = len(missing) + len(unfinished)
    report.none_of("I1", missing, "committed jobs are gone")
    if unfinished:
        states = Counter(rows[i].status for i in unfinished)
        report.breach("I1", f"{len(unfinished)} jobs did not end {expect}: {dict(states)}", unfinished)
    unrecorded = [i for i in ids if i in rows and not changes.get(i)]
    report.none_of("I1", unrecorded, "jobs have no recorded history (was the history trigger installed?)")

    attempts = attempts_by_job(records or [])
    found: dict[str, list] = defaultdict(list)
    duplicate_deliveries = 0
    counts: Counter = Counter()
    for job_id in ids:
        job_changes = list(changes.get(job_id, ()))
        row = rows.get(job_id)
        holds = holds_of(job_changes)
        counts["claims"] += len(holds)
        if records is not None:
            orphans, twice = _attach_records(job_id, holds, attempts.get(job_id, {}))
            found["orphans"] += orphans
            found["twice"] += twice
        created = row.created_at if row is not None else None
        due: float | None = None  # the job's due time as the row said just before each change
        previous: Change | None = None
        for change in job_changes:
            kind = change.kind
            counts[kind] += 1
            if kind == "insert":
                created = change.created_at if change.created_at is not None else created
            elif kind == "claim":
                # I4: a claim counts a new attempt.
                if previous is not None and change.attempt != (previous.attempt + 1):
                    found["uncounted_claims"].append((job_id, previous.attempt, change.attempt))
                # I5: the lease, from the database's clock at the claim; not before due, nor before created.
                lease = (change.lease_end or math.inf) - change.at
                if not (-EPSILON <= lease <= lease_seconds + EPSILON):
                    found["far_leases"].append((job_id, change.attempt, round(lease, 3)))
                if due is not None and change.at < due - EPSILON:
                    found["early_claims"].append((job_id, change.attempt, round(due - change.at, 3)))
                if created is not None and change.at < created - EPSILON:
                    found["before_created"].append((job_id, change.attempt))
            elif kind == "fail" or kind == "rescue":
                if change.failed_at is None or not (
                    change.at - STATEMENT_SLACK <= change.failed_at <= change.at + EPSILON
                ):
                    found["failures_off_clock"].append((job_id, change.attempt, change.failed_at, change.at))
                if kind == "fail" and change.status == "retrying":
                    counts["retries"] += 1
                    if change.run_at is None or change.failed_at is None or change.retry_delay is None:
                        found["retries_off_due"].append((job_id, change.attempt, "no due time"))
                    elif abs(change.run_at - change.failed_at - change.retry_delay) > RETRY_DUE_TOLERANCE:
                        off = round(change.run_at - change.failed_at - change.retry_delay, 3)
                        found["retries_off_due"].append((job_id, change.attempt, off))
            elif kind == "hand-back":
                if change.run_at is None or not (
                    change.at - STATEMENT_SLACK <= change.run_at <= change.at + HAND_BACK_DELAY_MAX + EPSILON
                ):
                    found["hand_backs_off_clock"].append((job_id, change.attempt, change.run_at, change.at))
            elif previous is not None and change.attempt < previous.attempt:
                found["attempts_given_back"].append((job_id, previous.attempt, change.attempt, kind))
            due = change.run_at
            previous = change

        for hold, after in pairwise(holds):
            # I2: claimed again only once the attempt before was over.
            if after.claim.at < hold.live_until() - EPSILON:
                found["overlaps"].append(
                    (job_id, hold.attempt, after.attempt, round(hold.live_until() - after.claim.at, 3))
                )
        for hold in holds:
            if hold.exit is None:
                continue
            if hold.exit.kind == "rescue" and hold.exit.at < hold.lease_end - EPSILON:
                found["early_rescues"].append((job_id, hold.attempt, round(hold.lease_end - hold.exit.at, 3)))
            if hold.exit.kind == "hand-back" and hold.start is not None:
                found["started_handed_back"].append((job_id, hold.attempt))  # I4: a run attempt given back
            if hold.exit.kind in ("complete", "fail"):
                check_stamps(job_id, hold, found)
            if hold.exit.kind == "complete":
                check_completion(job_id, hold, job_id in exactly_once, records is not None, found)
        if records is not None:
            counts["attempts_started"] += sum(1 for h in holds if h.start is not None)
            counts["attempts_cut_short"] += sum(1 for h in holds if h.start is not None and h.end is None)
            done = [h for h in holds if h.end is not None and h.end.get("outcome") == "done"]
            if len(done) > 1:
                duplicate_deliveries += len(done) - 1
        if row is not None and holds:
            last = holds[-1]
            counted = last.attempt - 1 if last.exit is not None and last.exit.kind == "hand-back" else last.attempt
            if row.attempt != counted:
                found["count_not_last"].append((job_id, row.attempt, counted))

    n = len(ids)
    report.check("I2", counts["claims"])
    report.check("I3", counts["complete"])
    report.check("I4", counts["claims"])
    report.check("I5", counts["claim"] + counts["fail"] + counts["rescue"] + counts["hand-back"])
    report.figures["claims"] = counts["claims"]
    report.figures["hand_backs"] = counts["hand-back"]
    report.figures["lease_rescues"] = counts["rescue"]
    report.figures["retries_checked"] = counts["retries"]
    if records is not None:
        report.figures["attempts_started"] = counts["attempts_started"]
        report.figures["attempts_cut_short"] = counts["attempts_cut_short"]
        report.figures["duplicate_deliveries"] = duplicate_deliveries
    report.none_of("I2", found["overlaps"], "claims came while the attempt before was live")
    report.none_of("I2", found["early_rescues"], "leases were taken back before they passed")
    report.none_of("I2", found["orphans"], "attempts ran that no claim handed out")
    report.none_of("I2/I4", found["twice"], "attempt numbers ran more than once")
    report.none_of("I4", found["uncounted_claims"], "claims did not count a new attempt")
    report.none_of("I4", found["started_handed_back"], "attempts that ran were handed back uncounted")
    report.none_of("I4", found["attempts_given_back"], "attempt counts went down other than by a hand-back")
    report.none_of("I4", found["count_not_last"], "jobs count other than their last claim's attempt")
    report.none_of("I5", found["far_leases"], f"leases not within {lease_seconds} s of the database's now at claim")
    report.none_of("I5", found["early_claims"], "claims came before the job was due")
    report.none_of("I5", found["before_created"], "claims came before the job was created")
    report.none_of("I5", found["failures_off_clock"], "failures stamped off the database's clock")
    report.none_of("I5", found["retries_off_due"], "retries not due exactly their delay after the recorded failure")
    report.none_of("I5", found["hand_backs_off_clock"], "hand-backs due off the database's clock")
    report.none_of("I5", found["stamps_off_clock"], "attempts whose started_at/completed_at lie outside their attempt")
    report.none_of("I3", found["stale_completions"], "completions written by a process that no longer held the job")
    report.none_of("I3", found["unrun_completions"], "completions of attempts that had not run")
    report.none_of("I3", found["early_completions"], "completions written before their attempt returned")
    if n and exactly_once:
        check_effects(report, [i for i in ids if i in exactly_once], rows, changes, effects)


def check_stamps(job_id: str, hold: Hold, found: dict[str, list]) -> None:
    """I5 for an attempt's own time stamps: the started_at and completed_at its end wrote lie between its
    claim and that write, on the database's clock (a host clock two minutes off puts them outside)."""
    end = hold.exit
    assert end is not None
    low, high = hold.claim.at - EPSILON, end.at + EPSILON
    stamps = [end.started_at] + ([end.completed_at] if end.kind == "complete" else [])
    if any(stamp is None or not (low <= stamp <= high) for stamp in stamps):
        found["stamps_off_clock"].append((job_id, hold.attempt, [round(s - end.at, 3) if s else s for s in stamps]))


def check_completion(job_id: str, hold: Hold, once: bool, recorded: bool, found: dict[str, list]) -> None:
    """I3 for one completion: by the process that claimed the attempt, after it ran."""
    completion = hold.exit
    assert completion is not None
    if completion.app != hold.claim.app:
        found["stale_completions"].append((job_id, hold.attempt, completion.app, hold.claim.app))
    if not recorded:
        return
    if hold.start is None:
        found["unrun_completions"].append((job_id, hold.attempt))
    elif once:  # completed inside its handler, with its effect: after the handler began
        if completion.at < hold.start["db_start"] - EPSILON:
            found["early_completions"].append((job_id, hold.attempt))
    elif hold.end is None or hold.end.get("outcome") != "done":
        found["early_completions"].append((job_id, hold.attempt, "no return"))
    elif completion.at < hold.end["db_end"] - EPSILON:
        found["early_completions"].append((job_id, hold.attempt, round(hold.end["db_end"] - completion.at, 3)))


def check_effects(
    report: Report,
    once: Sequence[str],
    rows: Mapping[str, JobRow],
    changes: Mapping[str, Sequence[Change]],
    effects: Mapping[str, Sequence[int]],
) -> None:
    """I3 for exactly-once jobs: the effect exists once, and is the completing attempt's."""
    doubles = [j for j in once if len(effects.get(j, ())) > 1]
    absent = [j for j in once if j in rows and rows[j].status == "completed" and not effects.get(j)]
    stale = []
    for j in once:
        completions = [c for c in changes.get(j, ()) if c.kind == "complete"]
        if len(effects.get(j, ())) == 1 and completions and effects[j][0] != completions[-1].attempt:
            stale.append((j, effects[j][0], completions[-1].attempt))
    report.check("I3", len(once))
    report.figures["exactly_once_jobs"] = len(once)
    report.figures["double_completions"] = len(doubles)
    report.none_of("I3", doubles, "exactly-once jobs took effect twice")
    report.none_of("I1", absent, "exactly-once jobs completed without their effect")
    report.none_of("I3", stale, "exactly-once effects were not the completing attempt's")


def read_jobs(url: str, job_ids: Sequence[Any]) -> dict[str, JobRow]:
    return {
        str(r[0]): JobRow(str(r[0]), r[1], r[2], r[3], r[4])
        for r in _rows(
            url,
            "SELECT id, status, attempt_number, extract(epoch FROM created_at)::float8,"
            " extract(epoch FROM completed_at)::float8 FROM jobs_job WHERE id = ANY(%s::uuid[])",
            [[str(i) for i in job_ids]],
        )
    }


def read_effects(url: str, job_ids: Sequence[Any]) -> dict[str, list[int]]:
    effects: dict[str, list[int]] = defaultdict(list)
    for job_id, attempt in _rows(
        url, "SELECT job_id, attempt FROM chaos_effect WHERE job_id = ANY(%s::uuid[])", [[str(i) for i in job_ids]]
    ):
        effects[str(job_id)].append(attempt)
    return dict(effects)


def check_jobs(
    report: Report,
    url: str,
    *,
    job_ids: Sequence[Any],
    records: list[dict[str, Any]] | None,
    lease_seconds: float,
    once_ids: Iterable[Any] = (),
    expect: str = "completed",
) -> dict[str, list[Change]]:
    """I1-I5 for these jobs, read from the database at `url`; returns their histories (for I7 and I8)."""
    once = [str(i) for i in once_ids]
    changes = history.read(url, job_ids)
    check_job_histories(
        report,
        job_ids=job_ids,
        rows=read_jobs(url, job_ids),
        changes=changes,
        records=records,
        lease_seconds=lease_seconds,
        once_ids=once,
        effects=read_effects(url, once) if once else {},
        expect=expect,
    )
    return changes


# --- I6, I7, I8 --------------------------------------------------------------------------------------------


def check_pickup(
    report: Report, changes: Mapping[str, Sequence[Change]], created: Mapping[str, float], *, within: float
) -> None:
    """I7: every one of these jobs was first claimed within `within` seconds of its commit (database clock)."""
    waits = []
    for job_id, at in created.items():
        claims = [c for c in changes.get(job_id, ()) if c.kind == "claim"]
        if claims:
            waits.append(claims[0].at - at)
    waits.sort()
    report.check("I7", len(created))
    report.figures["pickup_jobs"] = len(waits)
    report.figures["pickup_max_seconds"] = round(waits[-1], 3) if waits else None
    late = [w for w in waits if w > within]
    if len(waits) < len(created):
        report.breach("I7", f"{len(created) - len(waits)} jobs were never claimed")
    if late:
        report.breach("I7", f"{len(late)} jobs waited more than {within} s for a worker", [round(w, 2) for w in late])


def job_created(url: str, job_ids: Sequence[Any]) -> dict[str, float]:
    return {
        str(i): float(t)
        for i, t in _rows(
            url,
            "SELECT id, extract(epoch FROM created_at)::float8 FROM jobs_job WHERE id = ANY(%s::uuid[])",
            [[str(i) for i in job_ids]],
        )
    }


def check_tick_fires(report: Report, fires: Sequence[tuple[str, float]], *, due: Mapping[str, float]) -> None:
    """I6 over (scheduled tick, when its job was created) pairs: one job per tick, none created before its
    tick (database clock), every tick in `due` (tick -> its time) fired."""
    fired = Counter(tick for tick, _ in fires)
    twice = [tick for tick, n in fired.items() if n > 1]
    never = [tick for tick in due if tick not in fired]
    from datetime import datetime

    early = [
        (tick, round(datetime.fromisoformat(tick).timestamp() - created, 3))
        for tick, created in fires
        if created < datetime.fromisoformat(tick).timestamp() - EPSILON
    ]
    report.check("I6", len(set(fired) | set(due)))
    report.figures["ticks_fired"] = sum(fired.values())
    report.none_of("I6", twice, "ticks fired more than once")
    report.none_of("I6", early, "ticks fired before they were due")
    report.none_of("I6", never, "due ticks never fired")


def check_ticks(report: Report, url: str, *, handler: str, tag: str, due: Sequence[str]) -> None:
    """I6 for the jobs of a schedule whose payload carries `tag`."""
    fires = _rows(
        url,
        "SELECT payload->>'scheduled_for', extract(epoch FROM created_at)::float8 FROM jobs_job"
        " WHERE handler = %s AND payload->>'tag' = %s",
        [handler, tag],
    )
    from datetime import datetime

    check_tick_fires(
        report, [(t, float(c)) for t, c in fires], due={tick: datetime.fromisoformat(tick).timestamp() for tick in due}
    )


def check_worker_identities(
    report: Report,
    logs: Mapping[str, str],
    records: Iterable[dict[str, Any]],
    changes: Mapping[str, Sequence[Change]] | None = None,
) -> None:
    """I8: every start logged a new worker id; every attempt ran, and every claim was made, under one of them,
    the one the claiming process logged. `logs`: each process's log by its application_name."""
    by_process = {app: STARTED.findall(log) for app, log in logs.items()}
    started = [wid for ids in by_process.values() for wid in ids]
    repeated = [wid for wid, n in Counter(started).items() if n > 1]
    unknown = sorted({r["worker"] for r in records if r.get("event") == "start"} - set(started))
    claims = [c for cs in (changes or {}).values() for c in cs if c.kind == "claim"]
    unlogged = sorted({c.worker for c in claims} - set(started))
    elsewhere = sorted(
        {
            (c.worker, c.app)
            for c in claims
            if c.app in by_process and c.worker in started and c.worker not in by_process[c.app]
        }
    )
    strangers = sorted({c.app for c in claims if c.app not in by_process}) if by_process else []
    report.check("I8", len(started) + len(claims))
    report.figures["worker_starts"] = len(started)
    report.none_of("I8", repeated, "worker ids were used by two starts")
    report.none_of("I8", unknown, "attempts ran under an id no worker start logged")
    report.none_of("I8", unlogged, "claims were made under an id no worker start logged")
    report.none_of("I8", elsewhere, "claims were made under an id another process logged")
    report.none_of("I8", strangers, "claims were made by sessions none of the workers opened (application_name)")


# --- I1 and I9: workflow runs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunHistory:
    """What a run recorded: its path (the steps it finished, in order, by key), where it is, its step log."""

    id: str
    status: str
    path: Sequence[str]  # context["step_keys"]: each finished visit's step, in order
    current_step_key: str  # the step it is at ("" at the end)
    log: Sequence[tuple[str, str]]  # (step key, outcome) of every attempt logged, in order
    first_step: str
    targets: Mapping[str, frozenset[str]]  # step key -> the keys its exits may send the run to
    goal_targets: frozenset[str] = frozenset()  # a met goal may move the run to these from anywhere


def steps_out_of_turn(run: RunHistory) -> list[tuple]:
    """Log entries of a step that was not the one the run was at: a visit run again after it was recorded
    finished. Walks the log along the run's path, visit by visit: a loop's second visit of a step is its own."""
    out = []
    position = 0
    visits: Counter = Counter()
    for key, outcome in run.log:
        at = run.path[position] if position < len(run.path) else run.current_step_key
        if key != at:
            out.append((run.id, key, f"visit {visits[key]}", outcome, f"the run was at {at or 'its end'}"))
            continue
        if outcome in ADVANCING:
            visits[key] += 1
            position += 1
    return out


def moves_off_graph(run: RunHistory) -> list[tuple]:
    """Moves along the path the workflow's graph does not allow (a step recorded twice in a row without a
    loop, a jump to a step no exit names)."""
    if not run.path:
        return []
    off = []
    allowed_first = {run.first_step} | run.goal_targets
    if run.path[0] not in allowed_first:
        off.append((run.id, "start", run.path[0]))
    stops = [*run.path, *([run.current_step_key] if run.current_step_key else [])]
    for here, there in pairwise(stops):
        if there not in run.targets.get(here, frozenset()) and there not in run.goal_targets:
            off.append((run.id, here, there))
    return off


def check_run_histories(
    report: Report, runs: Sequence[RunHistory], *, run_ids: Sequence[Any], stranded: Sequence[Any], expect: str
) -> None:
    """I1 and I9 over these runs' histories; `stranded`: unfinished runs with no unfinished job to move them."""
    ids = [str(i) for i in run_ids]
    statuses = {run.id: run.status for run in runs}
    lost = [i for i in ids if statuses.get(i) != expect]
    report.check("I1", len(ids))
    report.check("I9", sum(len(run.log) for run in runs) + len(runs))
    report.figures["runs"] = len(ids)
    report.figures["runs_lost"] = len(lost)
    report.none_of("I1", lost, f"runs did not end {expect}: {dict(Counter(statuses.get(i) for i in lost))}")
    again = [entry for run in runs for entry in steps_out_of_turn(run)]
    off = [entry for run in runs for entry in moves_off_graph(run)]
    report.figures["steps_run_again_after_success"] = len(again)
    report.figures["step_visits_off_graph"] = len(off)
    report.figures["runs_stranded"] = len(stranded)
    report.figures["step_attempts_logged"] = sum(len(run.log) for run in runs)
    report.figures["loop_visits"] = sum(len(run.path) - len(set(run.path)) for run in runs)
    report.none_of("I9", again, "steps ran again after that visit was recorded finished")
    report.none_of("I9", off, "runs moved between steps the workflow's graph does not join")
    report.none_of("I9", stranded, "runs wait in queued/active/waiting with no job to move them")


def read_runs(url: str, run_ids: Sequence[Any]) -> list[RunHistory]:
    """The runs' histories, with each version's graph (read as the engine reads a published version)."""
    from uuid import UUID

    from workflows.application.definitions import load_version
    from workflows.domain.actions import END

    ids = [str(i) for i in run_ids]
    logs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for execution_id, key, outcome in _rows(
        url,
        "SELECT execution_id, step_key, outcome FROM workflows_executionlog"
        " WHERE execution_id = ANY(%s::uuid[]) ORDER BY execution_id, id",
        [ids],
    ):
        logs[str(execution_id)].append((key, outcome))
    graphs: dict[str, tuple[str, dict[str, frozenset[str]], frozenset[str]]] = {}
    runs = []
    for run_id, status, context, current_key, version_id in _rows(
        url,
        "SELECT id, status, context, current_step_key, version_id FROM workflows_workflowexecution"
        " WHERE id = ANY(%s::uuid[])",
        [ids],
    ):
        version = str(version_id)
        if version not in graphs:
            definition = load_version(UUID(version)).definition
            targets = {step.key: frozenset(k for k in step.targets if k != END) for step in definition.steps}
            goals = frozenset(goal.then for goal in definition.goals if goal.then != END)
            graphs[version] = (definition.steps[0].key if definition.steps else "", targets, goals)
        first, targets, goals = graphs[version]
        path = (context or {}).get("step_keys") or []
        runs.append(RunHistory(str(run_id), status, path, current_key or "", logs[str(run_id)], first, targets, goals))
    return runs


def check_runs(report: Report, url: str, *, run_ids: Sequence[Any], expect: str = "completed") -> None:
    """I1 and I9 for workflow runs, read from the database at `url`."""
    stranded = _rows(
        url,
        """
        SELECT r.id, r.status FROM workflows_workflowexecution r
        WHERE r.status IN ('queued', 'active', 'waiting')
          AND NOT EXISTS (SELECT 1 FROM jobs_job j WHERE j.id = r.next_job_id
                          AND j.status IN ('pending', 'retrying', 'running'))
        """,
    )
    check_run_histories(report, read_runs(url, run_ids), run_ids=run_ids, stranded=stranded, expect=expect)
