"""The C allocator of a node's process.

glibc gives each thread that finds the allocator busy an arena of its own, up
to eight per core, and an arena keeps the memory it grew to for its own
threads' later use. A node serves each call on a thread of its own, so a
burst of calls, each decoding a request, leaves a dozen arenas each as large
as the most its threads ever held at once, and the node's RSS far above its
memory budget while it holds no more than the budget. Two arenas keep what
is freed within reach of every thread.

glibc also raises its mmap threshold to the size of each large block freed,
up to 32 MiB, so that after the first bulk body of a few MiB is freed the
next ones come from the heap, which returns memory only from its top: a long
write to a storage that does not answer (each try builds its body again)
leaves the heap at the most those bodies and the small objects between them
ever took. A fixed threshold keeps large blocks mapped on their own and
returned when freed."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
"""``mallopt``'s parameters (glibc's malloc.h)."""
ARENAS = 2
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's own starting value; setting it turns its raising off."""


def tune_allocator() -> None:
    """Caps the allocator's arenas and fixes its mmap threshold; call it
    before any thread starts. Where the C library is not glibc, this changes
    nothing."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no mallopt in the C library %s; the allocator is left as it is", name)
        return
    for parameter, value in ((M_ARENA_MAX, ARENAS), (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)):
        if mallopt(parameter, value) != 1:
            log.debug("mallopt refused parameter %d = %d", parameter, value)
