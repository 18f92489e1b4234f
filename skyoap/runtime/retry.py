"""The retry policy: which errors are worth trying again, how long to pause
between tries, how many tries, and a pause that closing interrupts.

One layer owns the retries of a write: the worker that asked for it, because
it is the one that knows when the node is closing. Storage does not retry on
its own (the Elasticsearch transport and bulk helper have theirs turned off)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from skyoap.runtime.tracebacks import drop_locals

T = TypeVar("T")


def is_retriable(error: BaseException) -> bool:
    """Whether ``error`` says the same call may succeed later (storage busy or
    unreachable); the storage errors carry a ``retriable`` flag."""
    return bool(getattr(error, "retriable", False))


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int | None = 4
    """Tries in all, the first included; None: until it succeeds or is interrupted."""
    first_delay_s: float = 0.2
    multiplier: float = 5.0
    max_delay_s: float = 3.0

    def delay_s(self, failures: int) -> float:
        """The pause after ``failures`` failures in a row: exponential, bounded by
        ``max_delay_s``, and jittered down to half so that writers that failed
        together do not come back together."""
        full = min(self.max_delay_s, self.first_delay_s * self.multiplier ** (failures - 1))
        return full * random.uniform(0.5, 1.0)

    def call(
        self,
        fn: Callable[[], T],
        interrupt: threading.Event | None = None,
        retriable: Callable[[BaseException], bool] = is_retriable,
    ) -> T:
        """``fn()``, tried again after a pause while it raises an error
        ``retriable`` accepts, ``attempts`` times at most; the last error is
        raised. Once ``interrupt`` is set (its owner is closing) no pause is
        waited out and no try is made again."""
        interrupt = interrupt or threading.Event()
        failures = 0
        while True:
            try:
                return fn()
            except Exception as e:
                failures += 1
                out_of_tries = self.attempts is not None and failures >= self.attempts
                if not retriable(e) or out_of_tries or interrupt.is_set():
                    raise
                # What the failed try built (a bulk body) goes now, not when
                # the cyclic collector finds the error's frames.
                drop_locals(e)
                if interrupt.wait(self.delay_s(failures)):
                    raise


STORAGE_WRITES = RetryPolicy()
"""Topic appends, and a node's install of its indices, tables and topics at
start-up: four tries over about four seconds (0.2, 1 and 3 s at most between
them)."""
UNTIL_STORED = RetryPolicy(attempts=None, max_delay_s=5.0)
"""Writes of records: tried until storage takes them (at most 5 s apart) or
the node closes; the memory budget holds agents back meanwhile."""
