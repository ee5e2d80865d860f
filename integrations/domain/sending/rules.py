"""Which rules a message obeys, in which order, and the one answer they give together (`decide`).

The order: a test bypasses everything; then the rules that refuse (consent, the address, suppression,
a frequency cap set to skip), each asked in turn, the first refusal ending it; then the rules that defer
(the frequency cap, the send window). Deferrals combine by the latest: the message may go only once every
rule lets it, so the latest moment is asked again of every rule (a cap that frees the contact at 23:10 may
land outside the window, which then defers to its next opening) until all of them let it go then. Each rule
is monotone (a window's opening is the first at or after the moment asked; a cap, once under, stays under
while nothing more is sent), so this settles in a few rounds.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from integrations.domain.sending.caps import FrequencyCap, WhenCapped, frequency_cap, lookback
from integrations.domain.sending.consent import address, consent, suppression
from integrations.domain.sending.message import Outbound, Purpose, SentMessage
from integrations.domain.sending.verdicts import SEND, Defer, Refuse, Rule, Send, Verdict, combine
from integrations.domain.sending.windows import DEFAULT_SPREAD_SECONDS, SendWindow, send_window

MAX_ROUNDS = 8


@dataclass(frozen=True)
class SendingRules:
    """The rules in force for one message (integrations.application.sending_rules.effective_rules: the
    account's settings for the channel, overridden by the workflow's and the step's)."""

    window: SendWindow | None = None  # None: no quiet hours
    caps: tuple[FrequencyCap, ...] = ()
    when_capped: WhenCapped = WhenCapped.DEFER
    # Transactional messages obey the window unless the workflow exempts them by an explicit choice.
    transactional_exempt_from_window: bool = False

    def window_for(self, purpose: Purpose) -> SendWindow | None:
        if purpose is Purpose.TEST:
            return None
        if purpose is Purpose.TRANSACTIONAL and self.transactional_exempt_from_window:
            return None
        return self.window

    @property
    def spread_seconds(self) -> int:
        return self.window.spread_seconds if self.window is not None else DEFAULT_SPREAD_SECONDS

    def lookback(self, message: Outbound, now: datetime) -> datetime | None:
        """Since when the contact's sent messages matter to the caps (None: read none)."""
        if message.purpose is not Purpose.MARKETING:
            return None
        return lookback([cap for cap in self.caps if cap.applies_to(message)], now, message.zone)


def decide(
    message: Outbound,
    rules: SendingRules,
    *,
    now: datetime,
    sent: Sequence[SentMessage] = (),
    suppressed: Collection[str] = frozenset(),
) -> Verdict:
    """Send, Defer(until, reason) or Refuse(reason), for `message` at `now` (the database's clock).

    `sent`: the contact's messages since `rules.lookback(message, now)`; `suppressed`: the suppression list's
    entries for this address (normalized)."""
    if message.purpose is Purpose.TEST:
        return SEND
    refusals: list[Verdict] = [consent(message), address(message), suppression(message, suppressed)]
    found = combine(refusals)
    if isinstance(found, Refuse):
        return found
    window = rules.window_for(message.purpose)

    def at(moment: datetime) -> Verdict:
        return combine(
            [
                frequency_cap(
                    message,
                    rules.caps,
                    sent,
                    moment,
                    when_capped=rules.when_capped,
                    spread_seconds=rules.spread_seconds,
                ),
                send_window(message, window, moment),
            ]
        )

    verdict = at(now)
    for _ in range(MAX_ROUNDS):
        if not isinstance(verdict, Defer):
            return verdict
        later = at(verdict.until)
        if isinstance(later, Send):
            return verdict
        if isinstance(later, Refuse):
            return later
        if later.until <= verdict.until:  # cannot happen with monotone rules; never loop on it
            return verdict
        verdict = later
    return verdict


__all__ = ["Rule", "SendingRules", "decide"]
