"""A handler's "not now, ask me again later": its job snoozes (River's `JobSnooze`, Oban's `{:snooze, s}`).

A snooze is not a failure and not an attempt: the handler looked, found it may not act yet (a send window
closed, a frequency cap reached, a partner's quota spent until midnight) and says when to look again. The job
goes back to pending, due `seconds` from now by the database's clock; its attempt is given back (the claim
counted it, the snooze uncounts it, so `max_attempts` is never used up by waiting), its lease released, and
`Job.snoozes` counts how often it snoozed. Plain Python: the domain imports no Django.
"""

from __future__ import annotations

import math

# A snooze further away than this is a mistake (seconds taken for milliseconds, a date never reached): refused
# rather than kept for centuries. A send window that never opens within 400 days is refused by its own rule.
MAX_SNOOZE_SECONDS = 400 * 86_400.0


class InvalidSnooze(ValueError):
    """`snooze(seconds)` with seconds that are not a finite, non-negative number within MAX_SNOOZE_SECONDS."""


def snooze_seconds(seconds: object) -> float:
    """`seconds` as a float, checked: a snooze of NaN, a negative or an absurd delay is a bug in the handler."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidSnooze(f"snooze takes a number of seconds, not {type(seconds).__name__}")
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise InvalidSnooze(f"snooze takes a finite number of seconds from 0, not {seconds!r}")
    if value > MAX_SNOOZE_SECONDS:
        raise InvalidSnooze(f"snooze takes at most {MAX_SNOOZE_SECONDS:.0f} seconds (400 days), not {seconds!r}")
    return value


class JobSnooze(Exception):
    """Raised by a handler (or `JobContext.snooze`) to put its job back until `seconds` from now, uncounted.

    An Exception, not a `JobError`: `except JobError` in a handler does not swallow it, and the queue never
    classifies it (the worker takes it apart from failures). A batch handler that raises it hands its jobs
    back to be run one by one, as for any other exception; each then snoozes on its own.
    """

    def __init__(self, seconds: float, reason: str = "") -> None:
        self.seconds = snooze_seconds(seconds)
        self.reason = reason
        super().__init__(f"snoozed for {self.seconds:g} s" + (f": {reason}" if reason else ""))
