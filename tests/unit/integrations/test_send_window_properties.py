"""Send windows and frequency caps across zones and DST, by property: what the rules answer agrees with a
wall-clock reading of the window made independently, minute by minute."""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from integrations.domain.sending import Channel, Defer, FrequencyCap, Outbound, Purpose, SentMessage, Span
from integrations.domain.sending.caps import frequency_cap
from integrations.domain.sending.windows import SendWindow, send_window, spread_offset
from tests.support.zone_transitions import near_transitions

# Zones whose clocks do odd things: DST at midnight (Havana, Santiago), 30-minute DST (Lord Howe), a
# skipped day (Apia), negative DST (Dublin), half-hour and 45-minute offsets, the southern hemisphere.
ZONES = st.sampled_from(
    [
        "America/New_York",
        "Europe/Paris",
        "America/Havana",
        "America/Santiago",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "Europe/Dublin",
        "Asia/Kathmandu",
        "Pacific/Chatham",
        "Australia/Sydney",
        "Asia/Tehran",
        "Africa/Casablanca",
        "UTC",
    ]
)
INSTANTS = st.datetimes(min_value=datetime(2008, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC))
TIMES = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
# A zone and an instant: anywhere, or within three hours of one of the zone's clock changes.
ZONED = st.one_of(st.tuples(ZONES, INSTANTS), near_transitions(ZONES, years=(2008, 2035)))


@st.composite
def windows(draw: st.DrawFn) -> SendWindow:
    days = frozenset(draw(st.sets(st.integers(0, 6), min_size=1)))
    cuts = sorted(draw(st.sets(TIMES, min_size=1, max_size=6)))
    spans = []
    for index in range(0, len(cuts), 2):
        start = cuts[index]
        end = cuts[index + 1] if index + 1 < len(cuts) else None  # the last one may run to 24:00
        spans.append(Span(start, end))
    calendars = ("FR",) if draw(st.booleans()) else ()
    return SendWindow(days=days, spans=tuple(spans), calendars=calendars, spread_seconds=draw(st.integers(0, 900)))


def wall_open(window: SendWindow, moment: datetime, zone: ZoneInfo) -> bool:
    """The window read off the wall clock, as a person would: is today an open day, and is the time in a span?"""
    local = moment.astimezone(zone)
    if window.closed_on(local.date()):
        return False
    now = local.time().replace(tzinfo=None)
    return any(span.start <= now and (span.end is None or now < span.end) for span in window.spans)


def comparable(moment: datetime, zone: ZoneInfo) -> bool:
    """The two readings agree except during the second pass of a repeated hour (fold 1), which a wall clock
    cannot tell from the first: there an opening whose end falls in the repeat has already closed."""
    return moment.astimezone(zone).fold == 0


def outbound(zone: str, key: str = "k") -> Outbound:
    return Outbound(channel=Channel.SMS, purpose=Purpose.MARKETING, key=key, address="+1", time_zone=zone)


@settings(max_examples=300, deadline=None)
@given(zoned=ZONED, window=windows())
def test_open_means_open_on_the_wall_clock(zoned, window):
    zone, moment = zoned
    tz = ZoneInfo(zone)
    assume(comparable(moment, tz))
    assert window.is_open(moment, tz) == wall_open(window, moment, tz)


@settings(max_examples=300, deadline=None)
@given(zoned=ZONED, window=windows(), key=st.text(max_size=20))
def test_a_deferral_lands_in_the_first_opening_and_nothing_before_it_was_open(zoned, window, key):
    zone, moment = zoned
    tz = ZoneInfo(zone)
    verdict = send_window(outbound(zone, key), window, moment)
    if not isinstance(verdict, Defer):
        assert window.is_open(moment, tz)
        return
    start, end = window.opening_at(moment, tz)
    assert moment < start <= verdict.until < end
    assert verdict.until == start + spread_offset(key, min(window.spread_seconds, (end - start).total_seconds()))
    assert verdict.until - start < timedelta(seconds=max(window.spread_seconds, 1))
    assert window.is_open(verdict.until, tz)
    if comparable(verdict.until, tz):
        assert wall_open(window, verdict.until, tz)
    # Closed from now to the opening, read minute by minute on the wall clock (a week at most here).
    probe, last = moment, min(start, moment + timedelta(days=8))
    while probe < last:
        if comparable(probe, tz):
            assert not wall_open(window, probe, tz), probe
        probe += timedelta(minutes=1)


@settings(max_examples=200, deadline=None)
@given(
    zoned=ZONED,
    ages=st.lists(st.integers(0, 10 * 24 * 60), max_size=12),
    limit=st.integers(1, 5),
    hours=st.one_of(st.none(), st.integers(1, 72)),
    days=st.integers(1, 7),
)
def test_a_capped_message_is_deferred_to_exactly_when_it_is_under_the_cap_again(zoned, ages, limit, hours, days):
    zone, now = zoned
    tz = ZoneInfo(zone)
    cap = FrequencyCap(limit=limit, hours=hours) if hours else FrequencyCap(limit=limit, days=days)
    history = [SentMessage(now - timedelta(minutes=age), Channel.SMS, Purpose.MARKETING) for age in ages]
    verdict = frequency_cap(outbound(zone), [cap], history, now, spread_seconds=0)

    def counted(at: datetime) -> int:
        if cap.hours is not None:
            return sum(1 for s in history if at - timedelta(hours=cap.hours) < s.at)
        first = at.astimezone(tz).date() - timedelta(days=cap.days - 1)
        return sum(1 for s in history if s.at.astimezone(tz).date() >= first)

    if not isinstance(verdict, Defer):
        assert counted(now) < limit
        return
    assert counted(now) >= limit
    assert verdict.until > now
    assert counted(verdict.until) < limit
    assert counted(verdict.until - timedelta(seconds=1)) >= limit  # not a second earlier


def test_a_calendar_cap_across_a_midnight_dst_change_frees_at_the_first_instant_of_the_day():
    havana = ZoneInfo("America/Havana")
    cap = FrequencyCap(limit=1, days=1)
    # 7 March 2026, 20:00 in Havana; the 8th begins at 01:00 CDT (05:00Z): midnight does not exist.
    now = datetime(2026, 3, 8, 1, 0, tzinfo=UTC)
    history = [SentMessage(now - timedelta(hours=1), Channel.SMS, Purpose.MARKETING)]
    verdict = frequency_cap(outbound("America/Havana"), [cap], history, now, spread_seconds=0)
    assert isinstance(verdict, Defer)
    assert verdict.until == datetime(2026, 3, 8, 5, 0, tzinfo=UTC)
    assert verdict.until.astimezone(havana).replace(tzinfo=None) == datetime(2026, 3, 8, 1, 0)
    assert date(2026, 3, 8) == verdict.until.astimezone(havana).date()
