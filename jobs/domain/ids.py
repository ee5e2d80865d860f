"""Time-ordered UUIDs (version 7, RFC 9562) for job ids.

New ids land at the right edge of the primary-key index instead of at random
pages, which keeps bulk enqueue fast on PostgreSQL. Python 3.14 has
uuid.uuid7; until then, this.
"""

import os
import time
import uuid


def uuid7() -> uuid.UUID:
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80  # 48-bit Unix milliseconds
    value |= 0x7 << 76  # version 7
    value |= (rand >> 68) << 64  # 12 random bits
    value |= 0b10 << 62  # RFC 4122 variant
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF  # 62 random bits
    return uuid.UUID(int=value)
