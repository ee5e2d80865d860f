"""Cron ticks. A schedule fires once per tick; missed ticks (no worker ran) fire once, not in a burst.

A schedule's ticks are read in its time zone (`0 9 * * *` in Europe/Paris is nine o'clock there, summer and
winter) and kept in UTC. Which tick is due is decided on the database's clock by the caller.

Shared kernel (plain Python): the queue's schedules fire by these rules, and a workflow's scheduled hooks are
checked by them in their own pure validation (workflows.domain.scheduled_hooks).
"""

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, croniter

MAX_COUNTED_TICKS = 100_000  # counting missed ticks stops here (a per-minute schedule off for ~70 days)
# Whether an expression fires at all does not depend on when one asks (five fields, no year): any instant will do.
_PROBE = datetime(2000, 1, 1, tzinfo=UTC)


class InvalidCron(ValueError):
    pass


class InvalidTimeZone(ValueError):
    pass


def validate_cron(expression: str) -> str:
    """The expression, spaces normalised, if it is five cron fields that match some date; else InvalidCron.

    `0 0 30 2 *` is well formed but no date has a 30 February: croniter accepts it and then fails to find a
    tick, so it is refused here, where the caller can name the field, and not when the first tick is computed.
    """
    expression = _normalized(expression)
    try:
        croniter(expression, _PROBE).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidCron(
            f"{expression!r} never fires: no date matches its day of the month and month (e.g. 30 February)"
        ) from None
    return expression


def _normalized(expression: str) -> str:
    expression = " ".join(str(expression).split())
    if len(expression.split(" ")) != 5 or not croniter.is_valid(expression):
        raise InvalidCron(f"{expression!r} is not a five-field cron expression")
    return expression


def validate_time_zone(name: str) -> str:
    """An IANA time zone name (Europe/Paris, UTC)."""
    try:
        if not isinstance(name, str) or not name or name not in _zones():
            raise ZoneInfoNotFoundError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidTimeZone(f"{str(name)[:64]!r} is not an IANA time zone name (e.g. Europe/Paris, UTC)") from None
    return name


_ZONES: frozenset[str] | None = None


def _zones() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones()) | {"UTC"}
    return _ZONES


def next_tick(expression: str, after: datetime, time_zone: str = "UTC") -> datetime:
    """The first tick strictly after `after` (an aware datetime), read in `time_zone`; returned in UTC."""
    local = after.astimezone(ZoneInfo(time_zone))
    return croniter(_normalized(expression), local).get_next(datetime).astimezone(UTC)


MINUTES_A_DAY = 24 * 60
_MAX_DAYS_READ = 1000  # firing days read to find the closest two (an everyday schedule stops at the second)


def shortest_interval(expression: str) -> timedelta:
    """The shortest time between two consecutive ticks, read on the clock of the schedule's time zone (what
    a change of the clocks does to one night aside): `*/5 9-17 * * *` 5 minutes, `0,59 * * * *` 1 minute,
    `0 9 * * 1` a week.

    The times of day (minute and hour fields) are the same on every day that fires, so the closest two
    ticks are either two times of one day or the last time of a day and the first of the next firing day.
    """
    expression = _normalized(expression)
    fields = croniter(expression).expanded
    minutes = range(60) if fields[0] == ["*"] else sorted(int(m) for m in fields[0])
    hours = range(24) if fields[1] == ["*"] else sorted(int(h) for h in fields[1])
    times = sorted(hour * 60 + minute for hour in hours for minute in minutes)
    within_a_day = min((b - a for a, b in pairwise(times)), default=None)
    overnight = MINUTES_A_DAY - times[-1] + times[0]  # from a day's last tick to the next day's first
    if within_a_day is not None and within_a_day <= overnight:
        return timedelta(minutes=within_a_day)
    days = croniter("0 0 " + " ".join(expression.split(" ")[2:]), _PROBE)
    closest_days, previous = None, days.get_next(datetime)
    for _ in range(_MAX_DAYS_READ):
        day = days.get_next(datetime)
        apart = (day - previous).days
        closest_days = apart if closest_days is None else min(closest_days, apart)
        if closest_days == 1:
            break
        previous = day
    across = (closest_days or 1) * MINUTES_A_DAY - times[-1] + times[0]
    return timedelta(minutes=min(across, within_a_day) if within_a_day is not None else across)


def ticks_missed(expression: str, tick: datetime, now: datetime, time_zone: str = "UTC") -> int:
    """How many ticks after `tick` came due by `now` too: when a schedule fires late, these are skipped
    (they fire once, as `tick`), and the schedule shows how many."""
    missed = 0
    current = tick
    while missed < MAX_COUNTED_TICKS:
        current = next_tick(expression, current, time_zone)
        if current > now:
            break
        missed += 1
    return missed
