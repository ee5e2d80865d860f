"""The suite's time: `make chaos` runs every scenario inside its bound, on whatever machine it finds.

With a budget (RELAY_CHAOS_BUDGET seconds; `make chaos` gives 840 of its 900 s hard bound), the clock starts
when the suite is collected, and each scenario, as it starts, gets its share of what is left: its fixed cost
(workers starting, leases waited out, fixed phases) plus a part of the rest in proportion to what its full
load would cost. It sizes its load to that share, between its short size and its full size, from its cost
per unit of load (measured on the 2-core machine the suite was written on, busy with other work) times how
much slower this machine has been than those costs so far (learned from every sized scenario that ran
before). It reports the size it ran. A scenario that cannot fit even its short size in what is left, once the
short sizes of the scenarios after it are kept, fails at once, naming itself and the seconds it lacked; the
session's summary lists every scenario with its size and time, and `tests/chaos/summary.py` (run by `make
chaos` after pytest) fails the run for every scenario that did not report, even when the hard bound cut the
run short.

Without a budget (`make test`'s short form) every scenario runs its short size, and the waits keep their own
timeouts. Any size can still be set on its own (RELAY_CHAOS_<NAME>, tests/chaos/sizes.py): a set size is
run as set, whatever the budget.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.sizes import FULL, full_size, is_set, short_size, size

_ENV_BUDGET = os.environ.get("RELAY_CHAOS_BUDGET", "")
BUDGET_SECONDS = float(_ENV_BUDGET) if _ENV_BUDGET else (840.0 if FULL else 0.0)
STARTED = time.monotonic()


@dataclass(frozen=True)
class Scenario:
    """One scenario's place in the budget. `load`: the size it scales (None: a fixed scenario), and how
    many seconds one unit of it costs; `follows`: sizes that scale with it, between their short and full."""

    key: str
    test: str  # the test function's name
    fixed: float  # seconds it takes at any size: workers starting and stopping, leases, fixed phases
    load: str | None = None
    per_unit: float = 0.0
    follows: tuple[str, ...] = ()


# In the order `make chaos` runs them: the fixed ones first, the time-sized load last, so what the others
# leave over goes to the load scenarios. Costs: a full run on the 2-core VM shared with other agents (load
# average 7 to 10), with a third added for a busier day.
SCENARIOS = (
    Scenario("listen", "test_the_notification_connection_cut_again_and_again_polling_still_picks_every_job_up", 17),
    Scenario("frozen", "test_a_worker_frozen_past_its_lease_then_resumed_cannot_finalise_what_another_worker_took", 16),
    Scenario(
        "skew",
        "test_a_worker_two_minutes_fast_keeps_leases_due_times_and_ticks_on_the_database_clock",
        12,
        "SKEW_JOBS",
        1 / 100,
    ),
    Scenario(
        "restart",
        "test_a_postgresql_restart_mid_run_loses_nothing_and_the_caught_jobs_complete_soon_after",
        12,
        "CONNECTION_JOBS",
        1 / 120,
    ),
    Scenario("cut", "test_every_worker_connection_cut_mid_run_loses_nothing", 8, "CONNECTION_JOBS", 1 / 120),
    Scenario(
        "email",
        "test_kill_9_during_email_sends_loses_no_message_and_sends_none_twice",
        10,
        "EMAIL_SENDS",
        1 / 45,
        ("EMAIL_KILLS",),
    ),
    Scenario(
        "kill_jobs",
        "test_kill_9_of_random_workers_during_a_drain_loses_no_job_and_completes_none_twice",
        10,
        "KILL_JOBS",
        1 / 130,
        ("KILLS",),
    ),
    Scenario(
        "kill_runs",
        "test_kill_9_of_random_workers_during_workflow_runs_runs_no_step_twice",
        10,
        "KILL_RUNS",
        1 / 35,
        ("KILLS",),
    ),
    Scenario(
        "burst", "test_one_accounts_burst_beside_a_trickle_from_others", 15, "BURST_JOBS", 1 / 200, ("TRICKLE_JOBS",)
    ),
    Scenario(
        "snapshot",
        "test_a_long_repeatable_read_transaction_during_a_steady_load",
        16,
        "SNAPSHOT_SECONDS",
        1.05,  # the load's seconds, and the drain and the checks of what it queued
        ("SNAPSHOT_RATE",),
    ),
)
BY_TEST = {scenario.test: scenario for scenario in SCENARIOS}
BY_KEY = {scenario.key: scenario for scenario in SCENARIOS}


@dataclass
class Plan:
    """What one scenario may spend and the load it runs; `sizes` as it ran them, for its report."""

    scenario: Scenario
    share: float | None  # seconds; None: no budget
    sizes: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    seconds: float | None = None
    fraction: float = 1.0  # where its load sits between short (0) and full (1)

    def count(self, name: str) -> int:
        """The size to run for `name` (the scenario's load, a size that follows it, or any other)."""
        if name not in self.sizes:
            if is_set(name) or self.share is None:
                self.sizes[name] = int(size(name))
            else:
                short, full = short_size(name), full_size(name)
                self.sizes[name] = round(short + (full - short) * self.fraction)
        return self.sizes[name]

    def figures(self) -> dict[str, Any]:
        """The sizes it ran (and their full sizes) and its share of the budget, for its report."""
        return {
            "sizes": dict(self.sizes),
            "full_sizes": {name: int(full_size(name)) for name in self.sizes},
            "budget_share_seconds": round(self.share, 1) if self.share is not None else None,
        }


class Budget:
    def __init__(self, seconds: float, started: float) -> None:
        self.seconds = seconds
        self.started = started
        self.slowness = 1.0  # this machine against the costs above, learned as scenarios run
        self._learned = 0
        self.plans: dict[str, Plan] = {}
        self.refused: dict[str, str] = {}
        self.expected: set[str] | None = None  # the scenarios this session will run (None: all)

    def expect(self, tests: list[str]) -> None:
        """The scenarios collected for this session: only those keep room for later."""
        self.expected = {BY_TEST[test].key for test in tests if test in BY_TEST}

    @property
    def on(self) -> bool:
        return self.seconds > 0

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def _cost(self, scenario: Scenario, units: float) -> float:
        return (scenario.fixed + units * scenario.per_unit) * self.slowness

    def _least(self, scenario: Scenario) -> float:
        load = scenario.load
        units = size(load) if load and is_set(load) else (short_size(load) if load else 0)
        return self._cost(scenario, units)

    def _most(self, scenario: Scenario) -> float:
        load = scenario.load
        return self._cost(scenario, size(load) if load and is_set(load) else (full_size(load) if load else 0))

    def plan(self, test: str) -> Plan:
        scenario = BY_TEST[test]
        if not self.on:
            plan = Plan(scenario, None)
            self.plans[scenario.key] = plan
            return plan
        later = [
            s
            for s in SCENARIOS
            if s.key not in self.plans
            and s.key not in self.refused
            and s.key != scenario.key
            and (self.expected is None or s.key in self.expected)
        ]
        left = self.left()
        room = left - sum(self._least(s) for s in later)
        least = self._least(scenario)
        if room < least:
            reason = (
                f"{max(left, 0):.0f} s of the {self.seconds:.0f} s budget left, and this scenario needs"
                f" about {least:.0f} s at its short size once the {len(later)} after it have theirs"
            )
            self.refused[scenario.key] = reason
            raise BudgetExhausted(f"{scenario.key}: not run: {reason}")
        # Its share: its least, and the time beyond everyone's least in proportion to what its full load adds.
        spare = left - least - sum(self._least(s) for s in later)
        extra = self._most(scenario) - least
        extras = extra + sum(self._most(s) - self._least(s) for s in later)
        share = min(room, least + (spare * extra / extras if extras > 0 else 0.0))
        plan = Plan(scenario, share)
        if scenario.load is not None and not is_set(scenario.load):
            short, full = short_size(scenario.load), full_size(scenario.load)
            fits = (share / self.slowness - scenario.fixed) / scenario.per_unit
            units = max(short, min(full, fits))
            plan.fraction = (units - short) / (full - short) if full > short else 1.0
            plan.sizes[scenario.load] = int(units)
        self.plans[scenario.key] = plan
        return plan

    def finished(self, plan: Plan) -> None:
        plan.seconds = time.monotonic() - plan.started
        scenario = plan.scenario
        if not self.on or scenario.load is None:
            return
        expected = scenario.fixed + plan.count(scenario.load) * scenario.per_unit
        ratio = plan.seconds / expected
        # The mean of what the sized scenarios so far took against their costs (each counted once).
        self._learned += 1
        self.slowness += (ratio - self.slowness) / self._learned if self._learned > 1 else ratio - self.slowness

    def cap(self, timeout: float, *, floor: float = 30.0) -> float:
        """A wait's timeout, kept inside what is left of the budget (but never below `floor` seconds)."""
        if not self.on:
            return timeout
        return min(timeout, max(floor, self.left()))

    def summary(self) -> list[str]:
        lines = []
        for scenario in SCENARIOS:
            plan = self.plans.get(scenario.key)
            if scenario.key in self.refused:
                lines.append(f"  {scenario.key:<10} NOT RUN: {self.refused[scenario.key]}")
            elif plan is None:
                if self.on and (self.expected is None or scenario.key in self.expected):
                    lines.append(f"  {scenario.key:<10} NOT RUN (not collected, deselected, or the run stopped first)")
            else:
                took = f"{plan.seconds:.0f} s" if plan.seconds is not None else "did not finish"
                share = f" of a {plan.share:.0f} s share" if plan.share is not None else ""
                sizes = ", ".join(
                    f"{name}={n}" + (f" (full {int(full_size(name))})" if n != int(full_size(name)) else "")
                    for name, n in plan.sizes.items()
                )
                lines.append(f"  {scenario.key:<10} {took}{share}; {sizes or 'fixed'}")
        return lines


class BudgetExhausted(Exception):
    """A scenario the budget had no room left for."""


BUDGET = Budget(BUDGET_SECONDS, STARTED)
