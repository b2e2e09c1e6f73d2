"""UUIDv7 identifiers (RFC 9562): 48-bit Unix milliseconds, version 7, variant 0b10, random.

Identifiers made by one process are strictly increasing: within the same millisecond
(or when the clock steps back) the 74 random bits are treated as a counter and
incremented by a random step, so sorting by the string also sorts by creation order.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid

__all__ = ["uuid7"]

_RAND_BITS = 74  # 12 bits rand_a + 62 bits rand_b
_RAND_MAX = (1 << _RAND_BITS) - 1
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def uuid7() -> str:
    """A new UUIDv7 as its canonical lowercase string, monotonic within this process."""
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            rand = secrets.randbits(_RAND_BITS)
        else:
            # Same millisecond or clock went back: keep the last timestamp and count up.
            ms = _last_ms
            rand = _last_rand + 1 + secrets.randbits(16)
            if rand > _RAND_MAX:  # counter exhausted: borrow the next millisecond
                ms += 1
                rand = secrets.randbits(_RAND_BITS)
        _last_ms, _last_rand = ms, rand
    rand_a = rand >> 62
    rand_b = rand & ((1 << 62) - 1)
    value = (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | rand_a << 64
        | 0b10 << 62
        | rand_b
    )
    return str(uuid.UUID(int=value))
