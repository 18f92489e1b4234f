"""The deadline of the call a thread serves. The edge starts it for each
call (``edge/binding.py``); whatever the call then waits on (room in a queue
or in the memory budget, a read of storage) waits at most what is left of it,
so a call answers by its deadline however many waits it makes. Outside a call
(a worker's thread) every wait keeps its own limit."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_ends_at: ContextVar[float | None] = ContextVar("call_deadline", default=None)


def start(seconds: float) -> None:
    """The current call must answer within ``seconds`` from now."""
    _ends_at.set(time.monotonic() + seconds)


@contextlib.contextmanager
def call() -> Iterator[None]:
    """One call: no deadline until ``start``, none after the call."""
    token = _ends_at.set(None)
    try:
        yield
    finally:
        _ends_at.reset(token)


def remaining(limit_s: float) -> float:
    """How long a wait may last: ``limit_s``, or less if the current call's
    deadline comes first (0 once it has passed)."""
    ends_at = _ends_at.get()
    if ends_at is None:
        return limit_s
    return max(0.0, min(limit_s, ends_at - time.monotonic()))
