"""The invariants I1-I9 of issue #14, checked after a scenario from the database and the handler's records.

Every check reads what happened, never what the code meant to do: the rows of `jobs_job`, `chaos_effect` and
the workflow tables (through psycopg, so the same checks read the shared test database or a private cluster),
the lines `chaos.work` wrote for each attempt (tests/chaos/handlers.py), and the workers' own logs. A check
adds a sentence to `violations` for each breach and its numbers to `figures`; a scenario asserts there are no
violations and publishes the figures (tests/chaos/README.md).

- I1 no committed job disappears: every id enqueue returned is a row that reached the end the scenario expects.
- I2 at most one live attempt per job at any moment: attempt k+1 starts only after attempt k returned or its
  lease passed (whichever came first; both on the database's clock), and no attempt number runs twice.
- I3 a stale worker cannot finalise a job: an exactly-once effect is the job's last attempt's, and a completed
  job's completion time is its last attempt's end, not an earlier, stale attempt's.
- I4 a crash counts the attempt: every attempt that started has its own number, and the job's count is at
  least the highest one (a killed attempt is not run again under the same number).
- I5 lease and due times come from the database's clock: each lease ends within the lease length of the
  database's time at the handler's start (a host clock two minutes off would put it two minutes out), a retry
  is due its delay after the failure the database recorded, and a job never starts before it was created.
- I6 one cron fire per tick: no scheduled tick has two jobs, and every tick that came due fired.
- I7 NOTIFY is a hint, polling guarantees pickup: with notifications lost, each job still starts within the
  poll interval (and a slack for a loaded machine) of its commit.
- I8 each worker start has a unique identity: the ids the workers logged at start are all different, and
  every attempt was run by one of them.
- I9 a workflow run never runs a step again once it was recorded succeeded, and never stops in ACTIVE,
  QUEUED or WAITING with no unfinished job to move it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import psycopg

EPSILON = 0.05  # seconds: clock reads of one server, a few statements apart
STARTED = re.compile(r"worker (\S+) started: ")


@dataclass
class Report:
    scenario: str
    figures: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def breach(self, invariant: str, what: str, examples: Iterable[Any] = ()) -> None:
        shown = list(examples)[:5]
        self.violations.append(f"{invariant}: {what}" + (f" (e.g. {shown})" if shown else ""))

    def none_of(self, invariant: str, found: Sequence[Any], what: str) -> None:
        """A breach of `invariant` if anything was found: "<how many> <what>", with a few examples."""
        if found:
            self.breach(invariant, f"{len(found)} {what}", found)

    def assert_held(self) -> None:
        assert not self.violations, f"{self.scenario}: invariants broken:\n" + "\n".join(self.violations)


def _rows(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(sql, params).fetchall()


def attempts_by_job(records: Iterable[dict[str, Any]]) -> dict[str, dict[int, dict[str, list[dict]]]]:
    """job -> attempt -> {"start": [...], "end": [...]} from chaos.work's lines."""
    found: dict[str, dict[int, dict[str, list[dict]]]] = defaultdict(
        lambda: defaultdict(lambda: {"start": [], "end": []})
    )
    for record in records:
        if record.get("event") in ("start", "end"):
            found[record["job"]][record["attempt"]][record["event"]].append(record)
    return found


def check_jobs(
    report: Report,
    url: str,
    *,
    job_ids: Sequence[Any],
    records: list[dict[str, Any]],
    lease_seconds: float,
    once_ids: Iterable[Any] = (),
    expect: str = "completed",
) -> None:
    """I1-I5 for these jobs."""
    ids = [str(i) for i in job_ids]
    once = [str(i) for i in once_ids]
    exactly_once = set(once)
    rows = {
        str(row[0]): row
        for row in _rows(
            url,
            "SELECT id, status, attempt_number, extract(epoch FROM completed_at)::float8,"
            " extract(epoch FROM created_at)::float8, extract(epoch FROM failed_at)::float8,"
            " extract(epoch FROM run_at)::float8, retry_delay_seconds"
            " FROM jobs_job WHERE id = ANY(%s::uuid[])",
            [ids],
        )
    }
    missing = [i for i in ids if i not in rows]
    unfinished = [i for i in ids if i in rows and rows[i][1] != expect]
    report.figures["jobs"] = len(ids)
    report.figures["jobs_lost"] = len(missing) + len(unfinished)
    report.none_of("I1", missing, "committed jobs are gone")
    if unfinished:
        states = Counter(rows[i][1] for i in unfinished)
        report.breach("I1", f"{len(unfinished)} jobs did not end {expect}: {dict(states)}", unfinished)

    attempts = attempts_by_job(records)
    overlaps, reused, stale_completions, uncounted, far_leases, early = [], [], [], [], [], []
    duplicate_deliveries = 0
    duplicates_without_retry = []
    crashed = 0
    for job_id in ids:
        by_attempt = attempts.get(job_id, {})
        if not by_attempt:
            continue
        row = rows.get(job_id)
        numbers = sorted(by_attempt)
        for number in numbers:
            starts = by_attempt[number]["start"]
            if len({s["worker"] for s in starts}) > 1 or len(starts) > 1:
                reused.append((job_id, number))
            for start in starts:
                if start["lease_end"] is None or not (
                    -EPSILON <= start["lease_end"] - start["db_start"] <= lease_seconds + EPSILON
                ):
                    far_leases.append((job_id, number, start["lease_end"], start["db_start"]))
                if row is not None and start["db_start"] < row[4] - EPSILON:
                    early.append(job_id)
            if not by_attempt[number]["end"]:
                crashed += 1
        for earlier, later in pairwise(numbers):
            first = by_attempt[earlier]
            live_until = min([s["lease_end"] or 0 for s in first["start"]] + [e["db_end"] for e in first["end"]])
            next_start = min(s["db_start"] for s in by_attempt[later]["start"])
            if next_start < live_until - EPSILON:
                overlaps.append((job_id, earlier, later, round(live_until - next_start, 3)))
        if row is not None and row[2] < numbers[-1]:
            uncounted.append((job_id, row[2], numbers[-1]))
        ends = [e for n in numbers for e in by_attempt[n]["end"] if e.get("outcome") == "done"]
        if len(ends) > 1:
            duplicate_deliveries += len(ends) - 1
            if len({e["attempt"] for e in ends}) < len(ends) or (row is not None and row[2] < 2):
                duplicates_without_retry.append(job_id)
        # (An exactly-once job completes inside its handler, before its end line: its effect row is the check.)
        if row is not None and row[1] == "completed" and row[3] is not None and job_id not in exactly_once:
            last_ends = [e for e in by_attempt[numbers[-1]]["end"] if e.get("outcome") == "done"]
            # The acknowledgement follows the handler's return on the same host clock, within moments; a
            # stale attempt's acknowledgement would carry its own, earlier end.
            if last_ends and row[3] < last_ends[0]["finished"] - EPSILON:
                stale_completions.append((job_id, round(last_ends[0]["finished"] - row[3], 3)))
    report.figures["attempts_started"] = sum(len(a) for j, a in attempts.items() if j in set(ids))
    report.figures["attempts_cut_short"] = crashed
    report.figures["duplicate_deliveries"] = duplicate_deliveries
    report.none_of("I2", overlaps, "attempts started while an earlier one was live")
    report.none_of("I2/I4", reused, "attempt numbers ran more than once")
    report.none_of("I2", duplicates_without_retry, "jobs delivered twice without a second attempt")
    report.none_of("I4", uncounted, "jobs count fewer attempts than started")
    report.none_of("I5", far_leases, f"leases not within {lease_seconds} s of the database's now")
    report.none_of("I5", early, "attempts started before their job was created")
    report.none_of("I3", stale_completions, "completions carry an earlier attempt's end")

    retried = [row for row in rows.values() if row[5] is not None and row[7] is not None and row[1] == "completed"]
    off_due = [(str(r[0]), round(r[6] - r[5] - r[7], 3)) for r in retried if abs(r[6] - r[5] - r[7]) > 0.5]
    report.figures["retries_checked"] = len(retried)
    report.none_of("I5", off_due, "retries not due their delay after the recorded failure")

    if once:
        effects: dict[str, list[tuple]] = defaultdict(list)
        for job_id, attempt in _rows(
            url, "SELECT job_id, attempt FROM chaos_effect WHERE job_id = ANY(%s::uuid[])", [once]
        ):
            effects[str(job_id)].append(attempt)
        doubles = [j for j in once if len(effects[j]) > 1]
        absent = [j for j in once if rows.get(j) and rows[j][1] == "completed" and not effects[j]]
        stale = [j for j in once if len(effects[j]) == 1 and rows.get(j) and effects[j][0] != rows[j][2]]
        report.figures["exactly_once_jobs"] = len(once)
        report.figures["double_completions"] = len(doubles)
        report.none_of("I3", doubles, "exactly-once jobs took effect twice")
        report.none_of("I1", absent, "exactly-once jobs completed without their effect")
        report.none_of("I3", stale, "exactly-once effects were not the last attempt's")


def check_pickup(report: Report, records: list[dict[str, Any]], created: dict[str, float], *, within: float) -> None:
    """I7: every first attempt of these jobs started within `within` seconds of its commit (database clock)."""
    waits = sorted(
        r["db_start"] - created[r["job"]]
        for r in records
        if r.get("event") == "start" and r["attempt"] == 1 and r["job"] in created
    )
    report.figures["pickup_jobs"] = len(waits)
    report.figures["pickup_max_seconds"] = round(waits[-1], 3) if waits else None
    late = [w for w in waits if w > within]
    if len(waits) < len(created):
        report.breach("I7", f"{len(created) - len(waits)} jobs never started")
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


def check_ticks(report: Report, url: str, *, handler: str, tag: str, due: Sequence[str]) -> None:
    """I6: each tick of the schedule whose jobs carry `tag` has one job; every tick in `due` has one."""
    fired = Counter(
        row[0]
        for row in _rows(
            url,
            "SELECT payload->>'scheduled_for' FROM jobs_job WHERE handler = %s AND payload->>'tag' = %s",
            [handler, tag],
        )
    )
    twice = [tick for tick, n in fired.items() if n > 1]
    never = [tick for tick in due if tick not in fired]
    report.figures["ticks_fired"] = sum(fired.values())
    report.none_of("I6", twice, "ticks fired more than once")
    report.none_of("I6", never, "due ticks never fired")


def check_worker_identities(report: Report, logs: Iterable[str], records: list[dict[str, Any]]) -> None:
    """I8: every start logged a new worker id, and every attempt ran under one of them."""
    started = [match for log in logs for match in STARTED.findall(log)]
    repeated = [wid for wid, n in Counter(started).items() if n > 1]
    unknown = sorted({r["worker"] for r in records if r.get("event") == "start"} - set(started))
    report.figures["worker_starts"] = len(started)
    report.none_of("I8", repeated, "worker ids were used by two starts")
    report.none_of("I8", unknown, "attempts ran under an id no worker start logged")


def check_runs(report: Report, url: str, *, run_ids: Sequence[Any], expect: str = "completed") -> None:
    """I1 and I9 for workflow runs."""
    ids = [str(i) for i in run_ids]
    found = _rows(url, "SELECT id, status FROM workflows_workflowexecution WHERE id = ANY(%s::uuid[])", [ids])
    statuses = {str(i): s for i, s in found}
    report.figures["runs"] = len(ids)
    lost = [i for i in ids if statuses.get(i) != expect]
    report.figures["runs_lost"] = len(lost)
    report.none_of("I1", lost, f"runs did not end {expect}: {dict(Counter(statuses.get(i) for i in lost))}")
    again = _rows(
        url,
        """
        SELECT l.execution_id, l.step_index, count(*) FROM workflows_executionlog l
        JOIN workflows_executionlog ok ON ok.execution_id = l.execution_id AND ok.step_index = l.step_index
             AND ok.outcome = 'succeeded' AND l.id > ok.id
        WHERE l.execution_id = ANY(%s::uuid[])
        GROUP BY 1, 2
        """,
        [ids],
    )
    report.figures["steps_run_again_after_success"] = len(again)
    report.none_of("I9", again, "steps ran again after they were recorded succeeded")
    stranded = _rows(
        url,
        """
        SELECT r.id, r.status FROM workflows_workflowexecution r
        WHERE r.status IN ('queued', 'active', 'waiting')
          AND NOT EXISTS (SELECT 1 FROM jobs_job j WHERE j.id = r.next_job_id
                          AND j.status IN ('pending', 'retrying', 'running'))
        """,
    )
    report.figures["runs_stranded"] = len(stranded)
    report.none_of("I9", stranded, "runs wait in queued/active/waiting with no job to move them")
    report.figures["step_attempts_logged"] = _rows(
        url, "SELECT count(*) FROM workflows_executionlog WHERE execution_id = ANY(%s::uuid[])", [ids]
    )[0][0]
