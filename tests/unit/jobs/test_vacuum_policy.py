"""When the workers vacuum the queue's tables themselves (jobs.domain.vacuum)."""

from dataclasses import replace

from jobs.domain.vacuum import TableActivity, VacuumPolicy

POLICY = VacuumPolicy(grace_seconds=120)
# jobs_job as migration 0010 leaves it: vacuum past 1,000 + 1 % dead rows, analyze past 50 + 2 % changed.
QUIET = TableActivity(
    table="jobs_job",
    live_rows=100_000,
    dead_rows=0,
    changed_since_analyze=0,
    seconds_since_vacuum=None,
    seconds_since_analyze=None,
    vacuum_threshold=1000,
    vacuum_scale_factor=0.01,
    analyze_threshold=50,
    analyze_scale_factor=0.02,
    autovacuum_on=False,
)


def test_autovacuum_off_a_table_over_its_trigger_is_vacuumed_and_one_under_it_is_not():
    assert QUIET.vacuum_trigger == 2000
    assert not POLICY.needs_vacuum(replace(QUIET, dead_rows=2000))
    assert POLICY.needs_vacuum(replace(QUIET, dead_rows=2001))
    assert POLICY.needs_vacuum(replace(QUIET, dead_rows=2001, seconds_since_vacuum=1.0))  # nobody else will


def test_autovacuum_on_is_given_two_naptimes_before_the_workers_step_in():
    over = replace(QUIET, dead_rows=50_000, autovacuum_on=True)
    assert not POLICY.needs_vacuum(replace(over, seconds_since_vacuum=60))  # it vacuumed a minute ago
    assert POLICY.needs_vacuum(replace(over, seconds_since_vacuum=120))  # late: two naptimes
    assert POLICY.needs_vacuum(replace(over, seconds_since_vacuum=None))  # never vacuumed at all


def test_analyze_follows_its_own_trigger_and_clock():
    changed = replace(QUIET, changed_since_analyze=2051)
    assert QUIET.analyze_trigger == 2050
    assert POLICY.needs_analyze(changed)
    assert not POLICY.needs_analyze(replace(changed, changed_since_analyze=2050))
    assert not POLICY.needs_analyze(replace(changed, autovacuum_on=True, seconds_since_analyze=30))
    assert not POLICY.needs_vacuum(changed)  # changed rows are not dead rows


def test_a_table_this_role_does_not_own_is_left_alone():
    foreign = replace(QUIET, dead_rows=10**6, changed_since_analyze=10**6, may_vacuum=False)
    assert not POLICY.needs_vacuum(foreign)
    assert not POLICY.needs_analyze(foreign)


def test_an_empty_table_uses_the_threshold_alone():
    empty = replace(QUIET, live_rows=-1, dead_rows=1001)  # reltuples -1: never counted
    assert empty.vacuum_trigger == 1000
    assert POLICY.needs_vacuum(empty)


def test_a_held_back_vacuum_waits_longer_each_time_up_to_two_naptimes():
    assert [POLICY.retry_after(n, first=5) for n in (1, 2, 3, 4, 5, 6)] == [5, 10, 20, 40, 80, 120]
