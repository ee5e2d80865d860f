"""Pause the run: for a duration, until an instant, until a date-time or date on a clock, or until the next time
of day on a clock (the contact's, the account's, or a named zone)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time

from contacts.domain.clock import known_time_zone
from workflows.domain.actions import WaitClock, duration_seconds
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader, is_template

_TIME_OF_DAY = re.compile(r"\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class WaitConfig:
    seconds: float | None = None
    # ISO 8601: with a UTC offset, that instant; without one (a date-time or a date), read on `time_zone`.
    # Or a template that renders to either.
    until: str | None = None
    time_of_day: time | None = None  # the next time the clock reads this, on `time_zone`
    time_zone: str = WaitClock.CONTACT.value  # "contact", "account" or an IANA name


def parse(r: Reader) -> WaitConfig:
    seconds: float | None = None
    until: str | None = None
    duration = r.get("duration")
    if duration is not None:
        seconds = duration_seconds(r, duration)
    raw_until = r.string("until", max_length=500)
    if raw_until is not None:
        if is_template(raw_until):
            if r.check_template_at(r.at("until"), raw_until):
                until = raw_until
        else:
            reason = wait_until_problem(raw_until)
            if reason:
                r.error(r.at("until"), reason)
            else:
                until = raw_until
    raw_time = r.string("time_of_day", max_length=8)
    time_of_day = None
    if raw_time is not None:
        time_of_day = parse_time_of_day(raw_time)
        if time_of_day is None:
            r.error(r.at("time_of_day"), 'must be a time of day as "HH:MM" on a 24-hour clock, e.g. "09:00"')
    if sum(value is not None for value in (duration, raw_until, raw_time)) != 1:
        r.error(
            r.path,
            'needs exactly one of `duration` (e.g. 2, "90s", "3h", "2d 12h"), `until` (a date or date-time) '
            'or `time_of_day` (e.g. "09:00")',
        )
    zone = r.string("time_zone", max_length=64)
    if zone is not None:
        if zone not in (WaitClock.CONTACT, WaitClock.ACCOUNT) and known_time_zone(zone) != zone:
            r.error(
                r.at("time_zone"),
                'must be "contact" (the contact\'s time zone), "account" or an IANA time zone name such as '
                "Europe/Paris",
            )
        elif duration is not None:
            r.error(r.at("time_zone"), "applies to `until` or `time_of_day`; a duration is the same everywhere")
    return WaitConfig(seconds=seconds, until=until, time_of_day=time_of_day, time_zone=zone or WaitClock.CONTACT.value)


def parse_time_of_day(text: str) -> time | None:
    """`"09:00"` or `"9:00:30"` -> a time; None when it is no time of day."""
    match = _TIME_OF_DAY.fullmatch(text)
    if match is None:
        return None
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        return None
    return time(hours, minutes, seconds)


def parse_wait_until(text: str) -> datetime:
    """A wait's `until`: an ISO 8601 date-time (aware: that instant; naive: a wall-clock time, to be read on
    the wait's clock) or a date (its midnight, on that clock). Raises ValueError otherwise."""
    stripped = text.strip()
    if _DATE_ONLY.fullmatch(stripped):
        return datetime.combine(date.fromisoformat(stripped), time(0))
    value = datetime.fromisoformat(stripped)
    if value.tzinfo is not None and value.utcoffset() is None:
        raise ValueError("has a time zone without an offset")
    return value


def wait_until_problem(text: str) -> str | None:
    try:
        parse_wait_until(text)
    except ValueError:
        return (
            "must be an ISO 8601 date or date-time: 2026-12-01T09:00:00Z (that instant), 2026-12-01T09:00 or "
            "2026-12-01 (read in `time_zone`: the contact's by default)"
        )
    return None


CONFIG = StepConfigType(name="wait", keys=("duration", "until", "time_of_day", "time_zone"), parse=parse, waits=True)
