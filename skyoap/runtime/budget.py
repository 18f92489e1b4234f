"""The memory budget: how many bytes of accepted telemetry a node may hold
while it waits to be combined, sent on or stored.

Work enters a node through calls: an agent's on a receiver, a batch from
another node on an aggregator. While a call is served, what it holds (its
decoded requests, and what the handler made of them) is reserved: before a
request is decoded, room for what decoding it can cost must be there
(``reserve``), and a call that finds none in time is refused. Then the call
waits for room for *all* it carries before it puts anything in a queue
(``admission``), and is refused whole (RESOURCE_EXHAUSTED) when no room
comes in time; so a call is either taken whole or not at all, and an agent
that sends it again never counts it twice. Until the call ends, its
reservation and its queued items are both counted: both are in memory.
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
from contextvars import ContextVar

from skyoap.model.metrics import Downsampling, Metrics
from skyoap.model.stream import StreamData
from skyoap.runtime import deadline
from skyoap.runtime.instruments import Instruments

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


class _Reservation:
    __slots__ = ("nbytes", "waits_until")

    def __init__(self) -> None:
        self.nbytes = 0
        self.waits_until: float | None = None
        """When the call's first wait for room (since it last released what it
        held) ends: a stream reserves once per message and is admitted at its
        end, and waits no longer in all than one call."""


_current: ContextVar[_Reservation | None] = ContextVar("call_reservation", default=None)


class MemoryBudget:
    def __init__(self, limit_bytes: int, instruments: Instruments) -> None:
        if limit_bytes <= 0:
            raise ValueError("the memory limit must be above 0 bytes")
        self.limit_bytes = limit_bytes
        self._holders: list[Callable[[], int]] = []
        self._reserved = 0
        """What the calls being served hold (``reserve``)."""
        self._lock = threading.Lock()
        held = instruments.gauge(
            "skyoap_memory_held_bytes",
            "bytes of telemetry the node holds, in calls being served and accepted",
        )
        held.set_function(self.held)
        instruments.gauge("skyoap_memory_limit_bytes", "the node's memory budget").set(limit_bytes)
        self._shed = instruments.counter(
            "skyoap_memory_shed_total", "calls and batches refused whole because the memory budget was full"
        )

    def hold(self, holder: Callable[[], int]) -> None:
        """Counts what ``holder()`` says it holds, in bytes, from now on."""
        self._holders.append(holder)

    def held(self) -> int:
        return sum(h() for h in self._holders) + self._reserved

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """One call being served: what it reserves is counted until it ends."""
        reservation = _Reservation()
        token = _current.set(reservation)
        try:
            yield
        finally:
            _current.reset(token)
            self._release(reservation)

    def reserve(self, nbytes: int, wait_s: float) -> None:
        """Counts ``nbytes`` more that the current call holds, once they fit
        (waiting up to ``wait_s``, within the call's deadline); raises
        Overloaded when no room came. Outside a call, counts nothing."""
        reservation = _current.get()
        if reservation is None:
            return
        with self._room(nbytes, wait_s):
            self._reserved += nbytes
            reservation.nbytes += nbytes

    def release(self) -> None:
        """Frees what the current call reserved: it holds none of it any more
        (a stream that hands each message over before it reads the next)."""
        reservation = _current.get()
        if reservation is not None:
            self._release(reservation)

    def _release(self, reservation: _Reservation) -> None:
        with self._lock:
            self._reserved -= reservation.nbytes
            reservation.nbytes = 0
        reservation.waits_until = None

    def admission(self, nbytes: int, wait_s: float) -> contextlib.AbstractContextManager[None]:
        """Waits up to ``wait_s`` until ``nbytes`` more fit, then lets the
        caller put its items into their queues, one caller at a time (putting
        never waits past admission, so the budget is never overrun by callers
        admitted together). Raises Overloaded when no room came in time.
        Within a call, all its waits for room (``reserve`` included) end
        when the first would have."""
        return self._room(nbytes, wait_s)

    @contextlib.contextmanager
    def _room(self, nbytes: int, wait_s: float) -> Iterator[None]:
        """Holds the lock once ``nbytes`` more fit in the budget."""
        if nbytes > self.limit_bytes:
            self._shed.inc()
            raise Overloaded(
                f"the call carries more than the node's whole memory budget ({self.limit_bytes} bytes); "
                "send less per call"
            )
        ends_at = time.monotonic() + deadline.remaining(wait_s)
        reservation = _current.get()
        while True:
            with self._lock:
                held = self.held()
                if held + nbytes <= self.limit_bytes:
                    yield
                    return
            if reservation is not None:  # a call's waits for room share one wait
                if reservation.waits_until is None:
                    reservation.waits_until = ends_at
                ends_at = min(ends_at, reservation.waits_until)
            if time.monotonic() >= ends_at:
                self._shed.inc()
                raise Overloaded(
                    f"the node holds {held} bytes of telemetry, and {nbytes} more would pass "
                    f"its memory budget of {self.limit_bytes}"
                )
            time.sleep(POLL_S)
