"""Cron expressions: a well-formed one that no date matches is refused when it is checked, not when it fires."""

import datetime as dt

import pytest

from jobs.domain.schedule import InvalidCron, next_tick, validate_cron


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
