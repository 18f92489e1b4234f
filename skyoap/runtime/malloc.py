"""The C allocator of a node's process.

glibc gives each thread that finds the allocator busy an arena of its own, up
to eight per core, and an arena keeps the memory it grew to for its own
threads' later use. A node serves each call on a thread of its own, so a
burst of calls, each decoding a request, leaves a dozen arenas each as large
as the most its threads ever held at once, and the node's RSS far above its
memory budget while it holds no more than the budget. Two arenas keep what
is freed within reach of every thread."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
"""``mallopt``'s parameter for the most arenas (glibc's malloc.h)."""
ARENAS = 2


def limit_arenas() -> None:
    """Caps the allocator's arenas; call it before any thread starts. Where
    the C library is not glibc, this changes nothing."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no mallopt in the C library %s; arenas left as they are", name)
        return
    if mallopt(M_ARENA_MAX, ARENAS) != 1:
        log.debug("mallopt refused to cap arenas at %d", ARENAS)
