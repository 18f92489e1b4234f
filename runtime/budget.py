"""The memory budget: how many bytes of accepted telemetry a node may hold
while it waits to be combined, sent on or stored.

Work enters a node at its admission points only: an agent's call on a
receiver, a batch from another node on an aggregator. Each waits for room for
*all* it carries before it puts anything in a queue, and is refused whole
(RESOURCE_EXHAUSTED) when no room comes in time; so a call is either taken
whole or not at all, and an agent that sends it again never counts it twice.
Past admission nothing is dropped for lack of room: the queues behind take
every item and count their bytes, and the workers that hold items (L1
merges, L2, the record writer) report what they hold. A remote client's
queue is bounded by items instead (``--remote-buffer-size``): when it is full,
L1 waits, its queues grow, and the budget sheds agents.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from model.metrics import Downsampling, Metrics
from model.stream import StreamData
from runtime import deadline
from runtime.instruments import Instruments

ITEM_OVERHEAD_BYTES = 400
"""What an item costs in memory beyond its strings and numbers (``size_hint``):
the Python objects that hold them."""
POLL_S = 0.02


def memory_size(items: Iterable[StreamData]) -> int:
    """About how many bytes ``items`` take in memory."""
    return sum(item.size_hint() + ITEM_OVERHEAD_BYTES for item in items)


def admitted_size(items: Iterable[StreamData]) -> int:
    """What admitting ``items`` must find room for: a metric counts once for
    each level it becomes a row of (minute, hour, day), since L2 holds all
    three until storage takes them."""
    levels = len(Downsampling)
    return sum(
        (i.size_hint() + ITEM_OVERHEAD_BYTES) * (levels if isinstance(i, Metrics) else 1) for i in items
    )


class Overloaded(RuntimeError):
    """The node cannot take the work now; the caller should try again later."""


class MemoryBudget:
    def __init__(self, limit_bytes: int, instruments: Instruments) -> None:
        if limit_bytes <= 0:
            raise ValueError("the memory limit must be above 0 bytes")
        self.limit_bytes = limit_bytes
        self._holders: list[Callable[[], int]] = []
        self._lock = threading.Lock()
        held = instruments.gauge("skyoap_memory_held_bytes", "bytes of accepted telemetry the node holds")
        held.set_function(self.held)
        instruments.gauge("skyoap_memory_limit_bytes", "the node's memory budget").set(limit_bytes)
        self._shed = instruments.counter(
            "skyoap_memory_shed_total", "calls and batches refused whole because the memory budget was full"
        )

    def hold(self, holder: Callable[[], int]) -> None:
        """Counts what ``holder()`` says it holds, in bytes, from now on."""
        self._holders.append(holder)

    def held(self) -> int:
        return sum(h() for h in self._holders)

    def check_size(self, nbytes: int) -> None:
        """Refuses work that alone would pass the whole budget (a call can be
        refused this way while it is still coming in, before all of it is held)."""
        if nbytes > self.limit_bytes:
            self._shed.inc()
            raise Overloaded(
                f"the call carries more than the node's whole memory budget ({self.limit_bytes} bytes); "
                "send less per call"
            )

    @contextlib.contextmanager
    def admission(self, nbytes: int, wait_s: float) -> Iterator[None]:
        """Waits up to ``wait_s`` until ``nbytes`` more fit, then lets the
        caller put its items into their queues, one caller at a time (putting
        never waits past admission, so the budget is never overrun by callers
        admitted together). Raises Overloaded when no room came in time."""
        self.check_size(nbytes)
        ends_at = time.monotonic() + deadline.remaining(wait_s)
        while True:
            with self._lock:
                held = self.held()
                if held + nbytes <= self.limit_bytes:
                    yield
                    return
            if time.monotonic() >= ends_at:
                self._shed.inc()
                raise Overloaded(
                    f"the node holds {held} bytes of telemetry for storage, and {nbytes} more would pass "
                    f"its memory budget of {self.limit_bytes}"
                )
            time.sleep(POLL_S)
