"""What a sending rule answers: send, defer until a moment, or refuse; and how several answers combine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class Rule(StrEnum):
    """The rules, in the order `decide` asks them (refusals first, then the ones that only defer)."""

    TEST = "test"  # a test send: every rule is bypassed
    CONSENT = "consent"
    ADDRESS = "address"
    SUPPRESSION = "suppression"
    FREQUENCY_CAP = "frequency_cap"
    SEND_WINDOW = "send_window"


@dataclass(frozen=True)
class Send:
    """Go ahead."""


@dataclass(frozen=True)
class Defer:
    """Not now: ask again at `until` (UTC). Not an attempt and not a failure: the message keeps its place.

    `reason` is in a marketer's words ("waiting for the send window (opens Tue 09:00 Europe/Paris)"): the run's
    timeline shows it as it is."""

    until: datetime
    reason: str
    rule: Rule


@dataclass(frozen=True)
class Refuse:
    """Never, for this message: logged with its reason (a step is skipped, a job completes as skipped).

    `code` is short and stable, for payloads and statistics: unsubscribed, sms_opted_out, no_address,
    suppressed, over_cap."""

    reason: str
    rule: Rule
    code: str


Verdict = Send | Defer | Refuse
SEND = Send()


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Several rules' answers as one: a refusal beats a deferral beats sending; of refusals the first asked
    wins (its reason is the one logged), of deferrals the latest (the message can go only once every rule
    lets it)."""
    latest: Defer | None = None
    for verdict in verdicts:
        if isinstance(verdict, Refuse):
            return verdict
        if isinstance(verdict, Defer) and (latest is None or verdict.until > latest.until):
            latest = verdict
    return latest if latest is not None else SEND
