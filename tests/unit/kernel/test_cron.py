"""Cron expressions: a well-formed one that no date matches is refused when it is checked, not when it fires."""

import datetime as dt

import pytest

from kernel.cron import InvalidCron, next_tick, shortest_interval, validate_cron


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *", "15 10 30,31 2 *"])
def test_an_expression_no_date_matches_is_refused_saying_it_never_fires(expression):
    with pytest.raises(InvalidCron, match="never fires"):
        validate_cron(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "0 0 29 2 *",  # leap years only: it fires, rarely
        "0 0 29 2 1",  # 29 February or any Monday (cron's day-of-month OR day-of-week)
        "0 0 31 * *",  # the months that have a 31st
        "*  *  * * *",  # spaces are normalised
    ],
)
def test_rare_but_real_ticks_are_accepted(expression):
    cron = validate_cron(expression)
    assert next_tick(cron, dt.datetime(2026, 3, 1, tzinfo=dt.UTC)) > dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def test_a_malformed_expression_is_still_named_as_such():
    with pytest.raises(InvalidCron, match="not a five-field cron expression"):
        validate_cron("0 0 30 2")


@pytest.mark.parametrize(
    ("expression", "minutes"),
    [
        ("* * * * *", 1),
        ("*/5 9-17 * * 1-5", 5),
        ("0,59 * * * *", 1),  # 0:59 then 1:00
        ("0,59 23 * * *", 59),  # 23:00 and 23:59; the next is a day later
        ("55 23 * * *", 24 * 60),
        ("30 23,0 * * *", 60),  # 23:30, then 0:30 the next day
        ("0 0,23 1 * *", 23 * 60),  # the 1st at 0:00 and 23:00; the next 1st is weeks away
        ("0 9 * * 1", 7 * 24 * 60),
        ("0 0 1 * *", 28 * 24 * 60),  # 1 February to 1 March
        ("15,45 * * * *", 30),
    ],
)
def test_the_shortest_interval_between_two_ticks(expression, minutes):
    assert shortest_interval(expression) == dt.timedelta(minutes=minutes)


def test_the_shortest_interval_matches_the_ticks_themselves():
    """Against brute force: every tick for a year (or 2,000 ticks) from croniter."""
    for expression in ("7,52 */3 * * *", "0 22-23,0-1 * * 6,0", "*/20 23 * * *", "0 12 1,15 * *"):
        tick, closest = next_tick(expression, dt.datetime(2026, 1, 1, tzinfo=dt.UTC)), None
        for _ in range(2000):
            after = next_tick(expression, tick)
            closest = after - tick if closest is None else min(closest, after - tick)
            tick = after
        assert shortest_interval(expression) == closest, expression
