"""The wall clock, read in one place: every stored time is milliseconds
since the epoch. A component whose tests move time takes a ``clock`` of this
shape (the housekeeping tasks, the consumer group)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
