"""The chaos suite's time budget: shares, sizes that shrink to fit, a scenario refused by name when no room is
left, and the summary that fails a run for every scenario that did not report. No database, no workers."""

from __future__ import annotations

import json
import time

import pytest

from tests.chaos import summary
from tests.chaos.budget import BY_KEY, SCENARIOS, Budget, BudgetExhausted
from tests.chaos.sizes import full_size, short_size

KILL_JOBS = BY_KEY["kill_jobs"].test


def test_with_time_to_spare_a_scenario_runs_its_full_size():
    budget = Budget(100_000, time.monotonic())
    plan = budget.plan(KILL_JOBS)
    assert plan.count("KILL_JOBS") == full_size("KILL_JOBS")
    assert plan.count("KILLS") == full_size("KILLS")
    assert plan.figures()["sizes"] == {"KILL_JOBS": 10_000, "KILLS": 10}


def test_a_tight_budget_shrinks_the_load_between_its_short_and_full_size_and_says_so():
    least = sum(budget_cost(s, short=True) for s in SCENARIOS)
    most = sum(budget_cost(s, short=False) for s in SCENARIOS)
    budget = Budget((least + most) / 2, time.monotonic())
    plan = budget.plan(KILL_JOBS)
    n = plan.count("KILL_JOBS")
    assert short_size("KILL_JOBS") < n < full_size("KILL_JOBS")
    assert short_size("KILLS") <= plan.count("KILLS") < full_size("KILLS")  # the kills follow the load
    assert plan.share is not None
    assert plan.share < budget.seconds
    assert "KILL_JOBS=" in budget.summary()[[s.key for s in SCENARIOS].index("kill_jobs")]


def test_a_scenario_with_no_room_left_is_refused_by_name_and_the_summary_says_not_run():
    budget = Budget(5, time.monotonic())
    with pytest.raises(BudgetExhausted, match=r"^kill_jobs: not run: .* needs about"):
        budget.plan(KILL_JOBS)
    lines = budget.summary()
    assert any(line.split()[0] == "kill_jobs" and "NOT RUN" in line for line in lines)
    assert sum("NOT RUN" in line for line in lines) == len(SCENARIOS)  # the others never even started


def test_what_a_scenario_took_teaches_the_budget_how_slow_this_machine_is():
    budget = Budget(100_000, time.monotonic())
    plan = budget.plan(BY_KEY["cut"].test)
    plan.started -= 3 * budget_cost(BY_KEY["cut"], short=False)  # it took three times its estimate
    budget.finished(plan)
    assert budget.slowness == pytest.approx(3, rel=0.01)


def test_a_set_size_is_run_as_set_whatever_the_budget(monkeypatch):
    monkeypatch.setenv("RELAY_CHAOS_KILL_JOBS", "1234")
    plan = Budget(100_000, time.monotonic()).plan(KILL_JOBS)
    assert plan.count("KILL_JOBS") == 1234


def test_without_a_budget_every_scenario_runs_its_short_size_and_is_never_refused(monkeypatch):
    monkeypatch.delenv("RELAY_CHAOS", raising=False)
    budget = Budget(0, time.monotonic() - 10_000)
    plan = budget.plan(KILL_JOBS)
    assert plan.share is None
    assert budget.cap(120) == 120


def test_the_summary_fails_a_run_naming_every_scenario_that_did_not_report(tmp_path):
    report = tmp_path / "chaos-report.jsonl"
    reported = [s.key for s in SCENARIOS if s.key not in ("burst", "snapshot")]
    report.write_text(
        "".join(
            json.dumps({"key": key, "sizes": {}, "full_sizes": {}, "seconds": 1, "checked": {"I1": 3}}) + "\n"
            for key in reported
        )
    )
    lines, problems = summary.summarise(report)
    assert len(lines) == len(reported)
    assert [p.split(":")[0] for p in problems] == ["burst", "snapshot"]
    assert summary.main(["summary", str(report)]) == 1
    report.write_text(report.read_text() + "".join(json.dumps({"key": k}) + "\n" for k in ("burst", "snapshot")))
    assert summary.main(["summary", str(report)]) == 0


def budget_cost(scenario, *, short: bool) -> float:
    if scenario.load is None:
        return scenario.fixed
    units = short_size(scenario.load) if short else full_size(scenario.load)
    return scenario.fixed + units * scenario.per_unit
