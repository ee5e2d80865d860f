"""Frequency caps: at most N marketing messages per contact per period, all channels together or one.

A period is rolling (`hours`: the last 24 hours, counted back from the moment asked) or calendar days on the
contact's clock (`days`: today and the days before it, each from its local midnight). A message over a cap
is deferred to the moment the contact is under every cap again (or, when the sender chose so, skipped).
The rule takes the messages already sent (the ledger's rows for the contact since `lookback`) and is pure;
the database side checks and records a send in one statement with the same bounds (`FrequencyCap.since`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any

from integrations.domain.sending.message import Channel, Outbound, Purpose, SentMessage
from integrations.domain.sending.problems import Problems
from integrations.domain.sending.verdicts import SEND, Defer, Refuse, Rule, Verdict, combine
from integrations.domain.sending.windows import DEFAULT_SPREAD_SECONDS, spread_offset
from kernel.local_time import day_start, wall_clock

MAX_CAPS = 20
MAX_CAP_LIMIT = 10_000
MAX_CAP_HOURS = 24 * 366
MAX_CAP_DAYS = 366
CAP_KEYS = ("max", "hours", "days", "channel", "include_transactional")


class WhenCapped(StrEnum):
    """What becomes of a message over a cap: it waits until the contact is under it again, or is skipped."""

    DEFER = "defer"
    SKIP = "skip"


@dataclass(frozen=True)
class FrequencyCap:
    limit: int  # at most this many in the period
    hours: int | None = None  # a rolling period of so many hours
    days: int | None = None  # or so many calendar days on the contact's clock, today included
    channel: Channel | None = None  # None: every channel together
    include_transactional: bool = False  # transactional messages are never capped; they may count

    def counts(self, sent: SentMessage) -> bool:
        if self.channel is not None and sent.channel is not self.channel:
            return False
        return sent.purpose is Purpose.MARKETING or (
            self.include_transactional and sent.purpose is Purpose.TRANSACTIONAL
        )

    def applies_to(self, message: Outbound) -> bool:
        return self.channel is None or message.channel is self.channel

    def since(self, now: datetime, zone: tzinfo) -> datetime:
        """The first instant whose messages count at `now`: `now - hours`, or the local midnight that begins
        the first of the `days` (exclusive for rolling periods: a message exactly `hours` old no longer counts)."""
        if self.hours is not None:
            return now - timedelta(hours=self.hours)
        today = wall_clock(now, zone).date()
        return day_start(today - timedelta(days=(self.days or 1) - 1), zone)

    def under_again(self, sent: Sequence[SentMessage], now: datetime, zone: tzinfo) -> datetime | None:
        """None when the contact is under the cap at `now`; else the first moment it is again (if nothing
        more is sent meanwhile)."""
        if self.hours is not None:
            period = timedelta(hours=self.hours)
            times = sorted(s.at for s in sent if self.counts(s) and s.at > now - period)
            if len(times) < self.limit:
                return None
            # Under again once all but limit - 1 of them have aged out: the (len - limit + 1)-th oldest.
            return times[len(times) - self.limit] + period
        days = self.days or 1
        today = wall_clock(now, zone).date()
        dates = [wall_clock(s.at, zone).date() for s in sent if self.counts(s)]
        if sum(1 for d in dates if d >= today - timedelta(days=days - 1)) < self.limit:
            return None
        for ahead in range(1, days + 1):
            day = today + timedelta(days=ahead)
            if sum(1 for d in dates if d >= day - timedelta(days=days - 1)) < self.limit:
                return day_start(day, zone)
        raise AssertionError("unreachable: after `days` days no message sent so far counts")  # pragma: no cover

    def describe(self) -> str:
        what = "marketing message" if not self.include_transactional else "message"
        plural = "s" if self.limit != 1 else ""
        if self.hours is not None:
            period = "hour" if self.hours == 1 else f"{self.hours} hours"
        else:
            period = "day" if self.days == 1 else f"{self.days} days"
        channels = "all channels" if self.channel is None else self.channel.value
        return f"{self.limit} {what}{plural} per {period} ({channels})"


def lookback(caps: Sequence[FrequencyCap], now: datetime, zone: tzinfo) -> datetime | None:
    """How far back the ledger must be read for these caps at `now` (None: no cap, read nothing)."""
    starts = [cap.since(now, zone) for cap in caps]
    return min(starts) if starts else None


def frequency_cap(
    message: Outbound,
    caps: Sequence[FrequencyCap],
    sent: Sequence[SentMessage],
    now: datetime,
    *,
    when_capped: WhenCapped = WhenCapped.DEFER,
    spread_seconds: int = DEFAULT_SPREAD_SECONDS,
) -> Verdict:
    """Marketing messages over any cap are deferred until the contact is under every cap again (spread like a
    window's opening, so a calendar day's midnight is no burst), or skipped when the sender chose so.
    Transactional and test messages are never capped."""
    if message.purpose is not Purpose.MARKETING:
        return SEND
    zone = message.zone
    verdicts: list[Verdict] = []
    for cap in caps:
        if not cap.applies_to(message):
            continue
        until = cap.under_again(sent, now, zone)
        if until is None:
            continue
        if when_capped is WhenCapped.SKIP:
            return Refuse(f"over the frequency cap of {cap.describe()}", Rule.FREQUENCY_CAP, "over_cap")
        local = until.astimezone(zone)
        verdicts.append(
            Defer(
                until + spread_offset(message.key, spread_seconds),
                f"over the frequency cap of {cap.describe()}; under it again {local:%a %d %b %H:%M} "
                f"{message.time_zone}",
                Rule.FREQUENCY_CAP,
            )
        )
    return combine(verdicts)


# --- reading caps from settings ---------------------------------------------------------------------
def parse_caps(value: Any, path: str, problems: Problems) -> tuple[FrequencyCap, ...] | None:
    """Caps from settings: `[{"max": 3, "days": 1}, {"max": 1, "hours": 24, "channel": "sms"}]` (channel
    "all", the default, counts every channel; `include_transactional` counts transactional messages too,
    which are still never capped themselves). None when there was a problem."""
    before = len(problems)
    if not isinstance(value, list) or len(value) > MAX_CAPS:
        problems.add(path, f'must be a list of at most {MAX_CAPS} caps, e.g. [{{"max": 3, "days": 1}}]')
        return None
    caps = []
    for index, item in enumerate(value):
        cap = _cap(item, f"{path}[{index}]", problems)
        if cap is not None:
            caps.append(cap)
    return tuple(caps) if len(problems) == before else None


def _cap(item: Any, path: str, problems: Problems) -> FrequencyCap | None:
    if not isinstance(item, Mapping):
        problems.add(path, 'must be an object such as {"max": 3, "days": 1}')
        return None
    before = len(problems)
    for key in item:
        if key not in CAP_KEYS:
            problems.add(f"{path}.{key}", f"is not a cap setting; expected one of: {', '.join(CAP_KEYS)}")
    limit = _whole(item.get("max"), f"{path}.max", 1, MAX_CAP_LIMIT, problems, required=True)
    hours = _whole(item.get("hours"), f"{path}.hours", 1, MAX_CAP_HOURS, problems)
    days = _whole(item.get("days"), f"{path}.days", 1, MAX_CAP_DAYS, problems)
    if (item.get("hours") is not None) == (item.get("days") is not None):  # a null period is no period
        problems.add(path, "needs exactly one of `hours` (a rolling period) or `days` (calendar days, contact's clock)")
    channel: Channel | None = None
    raw_channel = item.get("channel", "all")
    if raw_channel != "all":
        try:
            channel = Channel(raw_channel)
        except ValueError:
            problems.add(f"{path}.channel", f"must be all, {', '.join(c.value for c in Channel)}")
    include = item.get("include_transactional", False)
    if not isinstance(include, bool):
        problems.add(f"{path}.include_transactional", "must be true or false")
    if len(problems) > before or limit is None:
        return None
    return FrequencyCap(limit=limit, hours=hours, days=days, channel=channel, include_transactional=include)


def _whole(value: Any, path: str, low: int, high: int, problems: Problems, *, required: bool = False) -> int | None:
    if value is None:
        if required:
            problems.add(path, f"is required: a whole number from {low} to {high}")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.add(path, f"must be a whole number from {low} to {high}")
        return None
    return value
