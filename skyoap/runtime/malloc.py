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
returned when freed.

What is freed in the middle of an arena stays resident until the arena is
trimmed: a node trims its arenas every few seconds, and reports what they
hold in use and free (``skyoap_allocator_bytes``), so that an RSS above the
budget can be told apart as memory in use or memory freed and kept."""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import functools
import logging
from typing import Any

from skyoap.runtime.instruments import Instruments

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
"""``mallopt``'s parameters (glibc's malloc.h)."""
ARENAS = 2
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's own starting value; setting it turns its raising off."""


TRIM_INTERVAL_S = 5.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


class AllocatorState(enum.Enum):
    IN_USE = "in_use"
    """Allocated from the arenas and not freed."""
    FREE = "free"
    """Freed into the arenas and still resident until trimmed."""
    MAPPED = "mapped"
    """Large blocks mapped on their own."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


@functools.cache
def _glibc(function: str) -> Any | None:
    """``function`` of the C library, looked up once; None where it has none."""
    found = getattr(_libc(), function, None)
    if found is None:
        log.debug("no %s in the C library; the allocator is left as it is", function)
    elif function == "mallinfo2":
        found.restype = _MallInfo2
    return found


def tune_allocator() -> None:
    """Caps the allocator's arenas and fixes its mmap threshold; call it
    before any thread starts. Where the C library is not glibc, this changes
    nothing."""
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return
    for parameter, value in ((M_ARENA_MAX, ARENAS), (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)):
        if mallopt(parameter, value) != 1:
            log.debug("mallopt refused parameter %d = %d", parameter, value)


def trim_allocator() -> None:
    """Returns to the system what the arenas hold freed."""
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)


def allocator_bytes() -> dict[AllocatorState, int] | None:
    """What the C allocator holds, by state; None where it cannot say."""
    mallinfo2 = _glibc("mallinfo2")
    if mallinfo2 is None:
        return None
    info = mallinfo2()
    return {
        AllocatorState.IN_USE: info.uordblks,
        AllocatorState.FREE: info.fordblks,
        AllocatorState.MAPPED: info.hblkhd,
    }


def report_allocator(instruments: Instruments) -> None:
    """``skyoap_allocator_bytes`` by state, read when scraped."""
    gauge = instruments.gauge(
        "skyoap_allocator_bytes", "what the C allocator holds: in use, freed and kept, mapped", ["state"]
    )
    for state in AllocatorState:
        gauge.labels(state=state.value).set_function(functools.partial(_bytes_in, state))


def _bytes_in(state: AllocatorState) -> int:
    return (allocator_bytes() or {}).get(state, 0)
