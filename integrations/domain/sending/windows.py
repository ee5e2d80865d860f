"""Send windows (quiet hours): the days and hours a message may reach a contact, on the contact's clock.

A window is a set of weekdays, the hours of each such day (one or more spans: 09:00-13:00 and 14:00-20:00),
and holidays (dates given, and calendars computed: `FR`). Each span of each open day is an *opening*: the
instants from its start to its end on that day's wall clock (kernel.local_time: a start in a DST gap opens
at the jump, a repeated time is its first occurrence, `24:00` is the next midnight). A message asked while
no opening holds is deferred to the next opening's start plus its spread offset: `hash(message key) mod
spread` (capped by the opening's length), so the messages waiting for an opening leave over its first
minutes instead of in one burst, each always at the same offset.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from typing import Any

from integrations.domain.sending.message import Outbound, Purpose
from integrations.domain.sending.problems import Problems
from integrations.domain.sending.verdicts import SEND, Defer, Refuse, Rule, Verdict
from kernel.local_time import at_time_on, wall_clock

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_WORDS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
EVERY_DAY = frozenset(range(7))
DEFAULT_SPREAD_SECONDS = 300  # an opening's deferred messages leave over its first five minutes
MAX_SPREAD_SECONDS = 3600
MAX_SPANS = 10
MAX_HOLIDAYS = 1000
LOOKAHEAD_DAYS = 400  # a window that opens on no day in a year and a month never opens
_HOURS = re.compile(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*")


@dataclass(frozen=True, order=True)
class Span:
    """Open from `start` to `end` on an open day's wall clock; `end` None is 24:00 (the next midnight)."""

    start: time
    end: time | None

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{'24:00' if self.end is None else f'{self.end:%H:%M}'}"


@dataclass(frozen=True)
class SendWindow:
    days: frozenset[int]  # 0 Monday .. 6 Sunday
    spans: tuple[Span, ...]  # sorted, not overlapping
    holidays: frozenset[date] = frozenset()
    calendars: tuple[str, ...] = ()  # computed holiday calendars, e.g. ("FR",)
    spread_seconds: int = DEFAULT_SPREAD_SECONDS
    name: str = ""  # the preset's name, when it is one

    def closed_on(self, day: date) -> bool:
        """A whole day without an opening: not an open weekday, or a holiday."""
        if day.weekday() not in self.days or day in self.holidays:
            return True
        return any(day in calendar_holidays(name, day.year) for name in self.calendars)

    def openings(
        self, first_day: date, zone: tzinfo, days: int = LOOKAHEAD_DAYS
    ) -> Iterator[tuple[datetime, datetime]]:
        """Every opening (start, end) in UTC, in order, from the local day `first_day` on."""
        for offset in range(days):
            day = first_day + timedelta(days=offset)
            if self.closed_on(day):
                continue
            for span in self.spans:
                start, end = at_time_on(day, span.start, zone), at_time_on(day, span.end, zone)
                if end > start:  # a span that falls wholly in a DST gap is no opening
                    yield start, end

    def opening_at(self, moment: datetime, zone: tzinfo) -> tuple[datetime, datetime] | None:
        """The opening that holds at `moment` or comes next (start, end); None if none comes in a year."""
        # No opening of an earlier day holds: each ends by the first instant of the next day, and `moment`,
        # read on its day, is at or past that day's first instant.
        first_day = wall_clock(moment, zone).date()
        for start, end in self.openings(first_day, zone):
            if end > moment:
                return start, end
        return None

    def is_open(self, moment: datetime, zone: tzinfo) -> bool:
        found = self.opening_at(moment, zone)
        return found is not None and found[0] <= moment

    def describe(self) -> str:
        """In words: "Mon-Fri 09:00-20:00, not on FR public holidays"."""
        days = _days_words(self.days)
        text = f"{days} {', '.join(str(span) for span in self.spans)}"
        if self.calendars:
            text += f", not on {'/'.join(self.calendars)} public holidays"
        if self.holidays:
            text += f", not on {len(self.holidays)} listed holiday{'s' if len(self.holidays) > 1 else ''}"
        return text


def _days_words(days: frozenset[int]) -> str:
    if days == EVERY_DAY:
        return "every day"
    ordered = sorted(days)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{_DAY_WORDS[ordered[0]]}-{_DAY_WORDS[ordered[-1]]}"
    return ", ".join(_DAY_WORDS[d] for d in ordered)


def spread_offset(key: str, seconds: float) -> timedelta:
    """Where in an opening's first `seconds` a message leaves: a hash of its key, so the same message always
    takes the same place and different ones are spread evenly."""
    whole = int(seconds)
    if whole <= 0:
        return timedelta(0)
    digest = hashlib.sha256(key.encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % whole)


def send_window(message: Outbound, window: SendWindow | None, now: datetime) -> Verdict:
    """Send while an opening of the window holds on the contact's clock; else defer to the next opening,
    spread. No window (or a test): send."""
    if window is None or message.purpose is Purpose.TEST:
        return SEND
    zone = message.zone
    found = window.opening_at(now, zone)
    if found is None:
        return Refuse(f"the send window ({window.describe()}) never opens", Rule.SEND_WINDOW, "window_never_opens")
    start, end = found
    if start <= now:
        return SEND
    release = start + spread_offset(message.key, min(window.spread_seconds, (end - start).total_seconds()))
    local = start.astimezone(zone)
    when = f"{_DAY_WORDS[local.weekday()]} {local:%d %b %H:%M} {message.time_zone}"
    return Defer(release, f"waiting for the send window (opens {when})", Rule.SEND_WINDOW)


# --- holidays -----------------------------------------------------------------------------------------
def easter_sunday(year: int) -> date:
    """Gregorian Easter Sunday (the anonymous algorithm of Meeus, Jones and Butcher)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    m = (32 + 2 * e + 2 * i - h - k) % 7
    n = (a + 11 * h + 22 * m) // 451
    month, day = divmod(h + m - 7 * n + 114, 31)
    return date(year, month, day + 1)


@lru_cache(maxsize=256)
def french_public_holidays(year: int) -> frozenset[date]:
    """France's eleven public holidays (Code du travail, art. L3133-1): New Year, Easter Monday, 1 May, 8 May,
    Ascension, Whit Monday, 14 July, 15 August, All Saints, 11 November, Christmas. (Alsace-Moselle's Good
    Friday and 26 December are regional: list them as a window's holidays where they apply.)"""
    easter = easter_sunday(year)
    fixed = [(1, 1), (5, 1), (5, 8), (7, 14), (8, 15), (11, 1), (11, 11), (12, 25)]
    moving = [easter + timedelta(days=1), easter + timedelta(days=39), easter + timedelta(days=50)]
    return frozenset([date(year, month, day) for month, day in fixed] + moving)


HOLIDAY_CALENDARS = {"FR": french_public_holidays}


def calendar_holidays(name: str, year: int) -> frozenset[date]:
    return HOLIDAY_CALENDARS[name](year)


# --- presets ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preset:
    window: SendWindow
    source: str  # the rule it follows
    channels: tuple[str, ...] = field(default=("sms", "voice"))


PRESETS: dict[str, Preset] = {
    # No telephone solicitation before 8 a.m. or after 9 p.m. at the called party's location.
    "us_federal": Preset(
        SendWindow(days=EVERY_DAY, spans=(Span(time(8), time(21)),), name="us_federal"),
        "47 CFR 64.1200(c)(1) (TCPA): 8:00-21:00 at the called party's location",
    ),
    "us_fl": Preset(
        SendWindow(days=EVERY_DAY, spans=(Span(time(8), time(20)),), name="us_fl"),
        "Florida Telephone Solicitation Act, Fla. Stat. 501.616(6)(a): 8:00-20:00 local time",
    ),
    "fr": Preset(
        SendWindow(days=frozenset(range(6)), spans=(Span(time(8), time(22)),), calendars=("FR",), name="fr"),
        "France: 8:00-22:00, not on Sundays or public holidays (the SMS marketing code of conduct)",
    ),
}
DEFAULT_WINDOW_PRESET = "us_federal"  # marketing SMS and calls of an account that chose nothing


# --- reading a window from settings -----------------------------------------------------------------
WINDOW_KEYS = ("preset", "days", "hours", "holidays", "holiday_calendars", "spread")


def parse_window(value: Any, path: str, problems: Problems) -> SendWindow | None:
    """A window from settings: a preset's name (`"us_federal"`), or an object

        {"days": ["mon-fri", "sat"], "hours": ["09:00-13:00", "14:00-20:00"], "holidays": ["2026-12-24"],
         "holiday_calendars": ["FR"], "spread": 300}

    or `{"preset": "fr", "holidays": [...], "spread": 600}` (a preset with more holidays or another spread).
    Returns None when there was a problem (each named by its path in `problems`)."""
    before = len(problems)
    if isinstance(value, str):
        return _preset(value, path, problems)
    if not isinstance(value, Mapping):
        problems.add(path, f"must be a preset ({', '.join(PRESETS)}) or an object with days and hours")
        return None
    for key in value:
        if key not in WINDOW_KEYS:
            problems.add(f"{path}.{key}", f"is not a window setting; expected one of: {', '.join(WINDOW_KEYS)}")
    base: SendWindow | None = None
    if "preset" in value:
        base = _preset(value["preset"], f"{path}.preset", problems)
        for key in ("days", "hours"):
            if key in value:
                problems.add(f"{path}.{key}", "is set by the preset; give days and hours without a preset instead")
    else:
        days = _days(value.get("days"), f"{path}.days", problems)
        spans = _spans(value.get("hours"), f"{path}.hours", problems)
        if days is not None and spans is not None:
            base = SendWindow(days=days, spans=spans)
    holidays = _holidays(value.get("holidays", []), f"{path}.holidays", problems)
    calendars = _calendars(value.get("holiday_calendars", []), f"{path}.holiday_calendars", problems)
    spread = _spread(value.get("spread"), f"{path}.spread", problems)
    if base is None or len(problems) > before:
        return None
    return SendWindow(
        days=base.days,
        spans=base.spans,
        holidays=base.holidays | holidays,
        calendars=tuple(dict.fromkeys((*base.calendars, *calendars))),
        spread_seconds=base.spread_seconds if spread is None else spread,
        name=base.name,
    )


def _preset(value: Any, path: str, problems: Problems) -> SendWindow | None:
    if not isinstance(value, str) or value not in PRESETS:
        problems.add(path, f"must name a preset: {', '.join(PRESETS)}")
        return None
    return PRESETS[value].window


def _days(value: Any, path: str, problems: Problems) -> frozenset[int] | None:
    if value is None:
        problems.add(path, 'is required: the days a message may go, e.g. ["mon-fri"] or ["mon-sun"]')
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        problems.add(path, 'must be a list of days or day ranges, e.g. ["mon-fri", "sat"]')
        return None
    days: set[int] = set()
    for index, item in enumerate(items):
        where = f"{path}[{index}]" if not isinstance(value, str) else path
        if not isinstance(item, str):
            problems.add(where, "must be a day (mon..sun) or a range (mon-fri)")
            continue
        first, _, last = item.strip().lower().partition("-")
        if first not in DAY_NAMES or (last and last not in DAY_NAMES):
            problems.add(where, f"{item[:20]!r} is not a day (mon..sun) or a range of days (mon-fri)")
            continue
        start, stop = DAY_NAMES.index(first), DAY_NAMES.index(last or first)
        days.update(day % 7 for day in range(start, stop + 1 if stop >= start else stop + 8))  # fri-mon wraps
    return frozenset(days) if days else None


def _clock(hours: str, minutes: str) -> time | None:
    h, m = int(hours), int(minutes)
    if h == 24 and m == 0:
        return None  # 24:00: the end of the day
    if h > 23 or m > 59:
        raise ValueError
    return time(h, m)


def _spans(value: Any, path: str, problems: Problems) -> tuple[Span, ...] | None:
    if value is None:
        problems.add(path, 'is required: the hours a message may go, e.g. ["09:00-20:00"]')
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or len(items) > MAX_SPANS:
        problems.add(path, f'must be a list of 1 to {MAX_SPANS} spans of hours, e.g. ["09:00-13:00", "14:00-20:00"]')
        return None
    spans: list[Span] = []
    for index, item in enumerate(items):
        where = f"{path}[{index}]" if not isinstance(value, str) else path
        match = _HOURS.fullmatch(item) if isinstance(item, str) else None
        try:
            if match is None:
                raise ValueError
            start, end = _clock(match[1], match[2]), _clock(match[3], match[4])
        except ValueError:
            problems.add(where, 'must be hours as "HH:MM-HH:MM" on a 24-hour clock (end 24:00 for midnight)')
            continue
        if start is None or (end is not None and end <= start):
            problems.add(where, "must end after it starts, within one day (a span past midnight is two spans)")
            continue
        spans.append(Span(start, end))
    spans.sort()
    for earlier, later in itertools.pairwise(spans):
        if earlier.end is None or later.start < earlier.end:
            problems.add(path, f"the spans {earlier} and {later} overlap")
            return None
    return tuple(spans) if spans and len(spans) == len(items) else None


def _holidays(value: Any, path: str, problems: Problems) -> frozenset[date]:
    if not isinstance(value, list) or len(value) > MAX_HOLIDAYS:
        problems.add(path, f'must be a list of at most {MAX_HOLIDAYS} dates, e.g. ["2026-12-24"]')
        return frozenset()
    found: set[date] = set()
    for index, item in enumerate(value):
        try:
            if not isinstance(item, str) or len(item.strip()) != 10:
                raise ValueError
            found.add(date.fromisoformat(item.strip()))
        except ValueError:
            problems.add(f"{path}[{index}]", "must be a date as YYYY-MM-DD")
    return frozenset(found)


def _calendars(value: Any, path: str, problems: Problems) -> tuple[str, ...]:
    if not isinstance(value, list):
        problems.add(path, f"must be a list of holiday calendars: {', '.join(HOLIDAY_CALENDARS)}")
        return ()
    names = []
    for index, item in enumerate(value):
        name = item.strip().upper() if isinstance(item, str) else None
        if name not in HOLIDAY_CALENDARS:
            problems.add(f"{path}[{index}]", f"must be a holiday calendar: {', '.join(HOLIDAY_CALENDARS)}")
        else:
            names.append(name)
    return tuple(names)


def _spread(value: Any, path: str, problems: Problems) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SPREAD_SECONDS:
        problems.add(path, f"must be a whole number of seconds from 0 to {MAX_SPREAD_SECONDS}")
        return None
    return value
