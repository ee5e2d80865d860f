"""Wall-clock times in a time zone, turned into instants: the one rule for DST gaps and repeats.

A marketer says "at 9:00", "until 1 March, 02:30", "between 8:00 and 21:00": times on a wall clock. Twice a
year a zone's clock skips an hour (a gap: 02:30 does not exist) or goes through one twice (a repeat: 01:30
happens twice). Every part of Relay that reads a wall clock (waits, send windows, calendar-day caps) turns it
into an instant here, so they all agree:

- a time in a gap is moved forward to the first instant that exists after it: the moment the clock jumps
  (02:30 on a spring-forward night in New York is 03:00 EDT, the transition itself);
- a repeated time is its first occurrence (01:30 on a fall-back night is 01:30 EDT, not EST).

Plain Python (zoneinfo); every instant returned is in UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo

MIDNIGHT = time(0, 0)


def wall_clock(moment: datetime, zone: tzinfo) -> datetime:
    """The naive wall-clock reading of an aware instant in `zone`."""
    return moment.astimezone(zone).replace(tzinfo=None, fold=0)


def is_gap(wall: datetime, zone: tzinfo) -> bool:
    """Whether this naive wall-clock time never happens in `zone` (the clock jumps over it)."""
    first = wall.replace(tzinfo=zone, fold=0)
    return wall_clock(first.astimezone(UTC), zone) != wall.replace(fold=0)


def local_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant (UTC) a naive wall-clock time names in `zone`: its first occurrence if the clock goes through
    it twice, the end of the jump if the clock skips it."""
    wall = wall.replace(tzinfo=None, fold=0)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if wall_clock(first, zone) == wall:
        return first  # it exists; fold=0 is the earlier of two occurrences
    # In a gap. fold=0 reads it with the offset before the jump, fold=1 with the offset after; the jump
    # lies between the two readings, so the first instant whose wall clock is at or past `wall` is found
    # by bisection to the second (zone transitions fall on whole seconds).
    other = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(first, other), max(first, other)
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if wall_clock(middle, zone) >= wall:
            high = middle
        else:
            low = middle
    high = high.replace(microsecond=0)  # the transition, on a whole second
    return high if wall_clock(high, zone) >= wall else high + timedelta(seconds=1)


def day_start(day: date, zone: tzinfo) -> datetime:
    """The instant a local calendar day begins (a zone whose clock skips midnight begins it at the jump)."""
    return local_instant(datetime.combine(day, MIDNIGHT), zone)


def at_time_on(day: date, wall: time | None, zone: tzinfo) -> datetime:
    """The instant of `wall` on `day` in `zone`; `None` stands for 24:00, the start of the next day."""
    if wall is None:
        return day_start(day + timedelta(days=1), zone)
    return local_instant(datetime.combine(day, wall), zone)


def next_time_of_day(after: datetime, wall: time, zone: tzinfo) -> datetime:
    """The first instant strictly after `after` at which the clock in `zone` reads `wall` (first occurrence
    on a repeat; the jump on a gap). Strictly after: a loop that waits "until 9:00" always waits."""
    day = wall_clock(after, zone).date()
    for offset in range(3):  # today's may be past; tomorrow's always exists (or its gap's end does)
        candidate = at_time_on(day + timedelta(days=offset), wall, zone)
        if candidate > after:
            return candidate
    raise AssertionError("unreachable: a time of day comes within two days")  # pragma: no cover
