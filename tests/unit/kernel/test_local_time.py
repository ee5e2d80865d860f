"""Wall-clock times become instants by one rule: a time in a DST gap moves forward to the jump, a repeated
time is its first occurrence. Examples from real zones, then properties across every zone zoneinfo knows."""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.local_time import day_start, is_gap, local_instant, next_time_of_day, wall_clock
from tests.support.zone_transitions import near_transitions

NEW_YORK = ZoneInfo("America/New_York")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "wall", "expected"),
    [
        # Spring forward: 02:00 -> 03:00; 02:30 does not exist, it is the jump (03:00 EDT = 07:00Z).
        ("America/New_York", "2026-03-08T02:30", "2026-03-08T07:00"),
        ("Europe/Paris", "2026-03-29T02:30", "2026-03-29T01:00"),
        # Fall back: 01:30 happens twice; the first (EDT, -04:00) is taken.
        ("America/New_York", "2026-11-01T01:30", "2026-11-01T05:30"),
        ("Europe/Paris", "2026-10-25T02:30", "2026-10-25T00:30"),
        # Lord Howe moves its clock by 30 minutes: 02:00 -> 02:30.
        ("Australia/Lord_Howe", "2026-10-04T02:15", "2026-10-03T15:30"),
        # Samoa skipped 30 December 2011 whole: any time of it is the first instant of the 31st.
        ("Pacific/Apia", "2011-12-30T10:00", "2011-12-30T10:00"),
        # An ordinary time is just itself.
        ("Asia/Kolkata", "2026-06-01T09:00", "2026-06-01T03:30"),
    ],
)
def test_a_wall_clock_time_names_one_instant(zone, wall, expected):
    assert local_instant(datetime.fromisoformat(wall), ZoneInfo(zone)) == utc(expected)


def test_gaps_are_told_apart_from_repeats():
    assert is_gap(datetime(2026, 3, 8, 2, 30), NEW_YORK)
    assert not is_gap(datetime(2026, 11, 1, 1, 30), NEW_YORK)
    assert not is_gap(datetime(2026, 3, 8, 3, 0), NEW_YORK)


def test_a_day_that_skips_its_midnight_begins_at_the_jump():
    # Havana moves its clocks at midnight: 8 March 2026 begins at 01:00 CDT.
    havana = ZoneInfo("America/Havana")
    start = day_start(date(2026, 3, 8), havana)
    assert wall_clock(start, havana) == datetime(2026, 3, 8, 1, 0)
    assert wall_clock(start - timedelta(seconds=1), havana) == datetime(2026, 3, 7, 23, 59, 59)


def test_the_next_time_of_day_is_strictly_after():
    nine = time(9, 0)
    before = utc("2026-06-01T12:00")  # 08:00 in New York
    assert next_time_of_day(before, nine, NEW_YORK) == utc("2026-06-01T13:00")
    at_nine = utc("2026-06-01T13:00")
    assert next_time_of_day(at_nine, nine, NEW_YORK) == utc("2026-06-02T13:00")  # a loop always waits


def test_the_next_time_of_day_across_a_gap_and_a_repeat():
    # 02:30 on the spring-forward night is the jump, 03:00 EDT; the next day's 02:30 is an ordinary one.
    evening = utc("2026-03-08T03:00")  # 22:00 EST on the 7th
    assert next_time_of_day(evening, time(2, 30), NEW_YORK) == utc("2026-03-08T07:00")
    assert next_time_of_day(utc("2026-03-08T07:00"), time(2, 30), NEW_YORK) == utc("2026-03-09T06:30")
    # 01:30 on the fall-back night: the first one; during the second, the next is tomorrow's.
    assert next_time_of_day(utc("2026-11-01T04:00"), time(1, 30), NEW_YORK) == utc("2026-11-01T05:30")
    assert next_time_of_day(utc("2026-11-01T06:10"), time(1, 30), NEW_YORK) == utc("2026-11-02T06:30")


walls = st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(2060, 12, 31))


def wall_near_a_change(zone_and_instant: tuple[str, datetime]) -> tuple[str, datetime]:
    """A wall-clock time read with the offset in force just before the change: it falls in the gap or the
    repeat as often as not."""
    zone, instant = zone_and_instant
    before = (instant - timedelta(hours=3)).astimezone(ZoneInfo(zone)).utcoffset() or timedelta(0)
    return zone, instant.replace(tzinfo=None) + before


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.tuples(st.timezone_keys(), walls),
        near_transitions(st.timezone_keys(), years=(1970, 2040)).map(wall_near_a_change),
    )
)
def test_a_wall_time_is_its_first_occurrence_or_the_end_of_its_gap(zone_and_wall):
    zone, wall = zone_and_wall
    tz = ZoneInfo(zone)
    instant = local_instant(wall, tz)
    assert instant.tzinfo is UTC
    # The first instant at which the wall clock reads `wall` or later: one second before, it read less.
    assert wall_clock(instant, tz) >= wall
    assert wall_clock(instant - timedelta(seconds=1), tz) < wall
    if not is_gap(wall, tz):
        assert wall_clock(instant, tz) == wall
        assert instant.astimezone(tz).fold == 0  # the first of two, when the clock goes through it twice


@settings(max_examples=300, deadline=None)
@given(
    zone_and_after=st.one_of(
        st.tuples(
            st.timezone_keys(),
            st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2050, 1, 1), timezones=st.just(UTC)),
        ),
        near_transitions(st.timezone_keys(), years=(1970, 2040)).map(
            lambda pair: (pair[0], pair[1] - timedelta(hours=12))
        ),
    ),
    wall=st.one_of(st.times(), st.sampled_from([time(0, 0), time(1, 30), time(2, 30), time(3, 0)])),
)
def test_the_next_time_of_day_is_the_first_after_and_within_two_days(zone_and_after, wall):
    zone, after = zone_and_after
    tz = ZoneInfo(zone)
    found = next_time_of_day(after, wall, tz)
    assert after < found <= after + timedelta(days=2, hours=1)
    # The earliest of the days' occurrences (or gap ends) of `wall` that comes after `after`.
    today = wall_clock(after, tz).date()
    candidates = {local_instant(datetime.combine(today + timedelta(days=n), wall), tz) for n in range(-1, 3)}
    assert found == min(c for c in candidates if c > after)
