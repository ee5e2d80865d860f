"""Hypothesis strategies for the instants where a zone's clock changes (DST and other jumps), found by
scanning the zone's offsets: random instants almost never fall in the one hour a year that matters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from hypothesis import strategies as st


@lru_cache(maxsize=4096)
def transitions(zone: str, year: int) -> tuple[datetime, ...]:
    """The instants (UTC, to the second) in `year` at which `zone`'s UTC offset changes."""
    tz = ZoneInfo(zone)
    found = []
    moment = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    step = timedelta(hours=6)
    while moment < end:
        later = moment + step
        if moment.astimezone(tz).utcoffset() != later.astimezone(tz).utcoffset():
            low, high = moment, later
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high.replace(microsecond=0))
        moment = later
    return tuple(found)


@st.composite
def near_transitions(draw: st.DrawFn, zones: st.SearchStrategy[str], years: tuple[int, int] = (2000, 2040)):
    """(zone, an instant within three hours of one of its clock changes); a zone with none in the year drawn
    gives an instant of that year."""
    zone = draw(zones)
    year = draw(st.integers(*years))
    changes = transitions(zone, year)
    base = draw(st.sampled_from(changes)) if changes else datetime(year, 6, 1, tzinfo=UTC)
    seconds = draw(st.one_of(st.integers(-3 * 3600, 3 * 3600), st.sampled_from([-1, 0, 1, -1800, 1800, 3600])))
    return zone, base + timedelta(seconds=seconds)
