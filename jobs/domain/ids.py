"""Time-ordered UUIDs (version 7, RFC 9562) for job ids.

New ids land at the right edge of the primary-key index instead of at random
pages, which keeps bulk enqueue fast on PostgreSQL. Python 3.14 has
uuid.uuid7; until then, this.

A job's id is made when it is enqueued, so its first 48 bits are its creation
time (the enqueuing host's clock, to the millisecond): "newest first" is the
primary key read backwards, and a time bound is a range of it (`uuid7_floor`).
That is why the jobs table has no index on created_at (issue 15: each index is
written again by every claim and every completion).
"""

import os
import threading
import time
import uuid
from datetime import datetime

_VERSION_AND_VARIANT = (0x7 << 76) | (0b10 << 62)
_RANDOM = (0xFFF << 64) | 0x3FFF_FFFF_FFFF_FFFF  # 12 + 62 random bits
_LOW = 0x3FFF_FFFF_FFFF_FFFF  # the 62 random bits below the variant
_lock = threading.Lock()
_last = 0


def _compose(ms: int, rand: int) -> int:
    value = (ms & 0xFFFF_FFFF_FFFF) << 80  # 48-bit Unix milliseconds
    value |= _VERSION_AND_VARIANT  # version 7, RFC 4122 variant
    value |= (rand >> 68) << 64  # 12 random bits
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF  # 62 random bits
    return value


def uuid7(at: float | None = None) -> uuid.UUID:
    """A new id; `at` (epoch seconds) sets its time, for data made after the fact.

    Without `at`, ids made by one process only grow (RFC 9562's monotonic random, method 2): a second id in
    the same millisecond, or after the clock stepped back, is the last one plus a random step, so one
    process's jobs list newest first in the order it enqueued them.
    """
    rand = int.from_bytes(os.urandom(10), "big")
    if at is not None:
        return uuid.UUID(int=_compose(int(at * 1000), rand))
    global _last
    # _compose, inlined: enqueue_many makes one id per job
    value = (
        ((time.time_ns() // 1_000_000) & 0xFFFF_FFFF_FFFF) << 80
        | _VERSION_AND_VARIANT
        | (rand >> 68) << 64
        | rand & _LOW
    )
    with _lock:
        if value <= _last:
            low = (_last & _LOW) + 1 + (rand & 0xFFFF_FFFF)
            value = (_last & ~_LOW) | low if low <= _LOW else _next_after(_last, rand)
        _last = value
    return uuid.UUID(int=value)


def _next_after(last: int, rand: int) -> int:
    """`last` plus a random step of up to 2**32 in the random bits, carried into the time if they overflow."""
    ms, bits = last >> 80, last & _RANDOM
    counter = (((bits >> 64) & 0xFFF) << 62) | (bits & 0x3FFF_FFFF_FFFF_FFFF)  # the 74 random bits, in order
    counter += 1 + (rand & 0xFFFF_FFFF)
    if counter >> 74:
        ms, counter = ms + 1, counter & ((1 << 74) - 1)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= _VERSION_AND_VARIANT
    value |= (counter >> 62) << 64
    value |= counter & 0x3FFF_FFFF_FFFF_FFFF
    return value


def uuid7_floor(at: datetime) -> uuid.UUID:
    """The smallest id made at `at`'s millisecond or later: ids made before it compare lower."""
    ms = int(at.timestamp() * 1000)
    return uuid.UUID(int=((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | (0b10 << 62))


def uuid7_time(value: uuid.UUID) -> float:
    """When an id was made (epoch seconds, to the millisecond)."""
    return (value.int >> 80) / 1000
