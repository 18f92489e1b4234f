"""Crash points, for the fault tests: ``SKYOAP_CRASH_AT=name`` (or ``name:n``,
the n-th time it is reached) makes the process kill itself with SIGKILL at
the point of that name, as a power cut would: nothing after it runs, no
buffer is flushed. Unset, a crash point costs one comparison."""

from __future__ import annotations

import itertools
import os
import signal

_NAME, _, _NTH = os.environ.get("SKYOAP_CRASH_AT", "").partition(":")
_reached = itertools.count(1)


def crash_point(name: str) -> None:
    if name == _NAME and next(_reached) >= int(_NTH or 1):
        os.kill(os.getpid(), signal.SIGKILL)
