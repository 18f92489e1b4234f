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
every item and count their bytes, as do the workers that hold items (L1
merges, L2, the record writer). Each count (``HeldBytes``) passes every
change on to the budget at once, so the budget is one number: a call
waiting for room sleeps on a condition that every fall of it wakes, and
nobody sums the holders or polls. A remote client's
queue is bounded by items instead (``--remote-buffer-size``): when it is full,
L1 waits, its queues grow, and the budget sheds agents.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

from skyoap.model.metrics import Downsampling, Metrics
from skyoap.model.stream import StreamData
from skyoap.runtime import deadline
from skyoap.runtime.instruments import Instruments

ITEM_OVERHEAD_BYTES = 400
"""What an item costs in memory beyond its strings and numbers (``size_hint``):
the Python objects that hold them."""


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


class HeldBytes:
    """A count of the bytes one part of a node holds (a queue, the values a
    worker merges, a bulk in hand). Every change is passed on at once to
    what it is part of: a larger count (a worker's), or the node's budget,
    which so always knows what the node holds without asking anyone."""

    __slots__ = ("_lock", "_part_of", "_value")

    def __init__(self, part_of: HeldBytes | None = None) -> None:
        self._value = 0
        self._part_of: HeldBytes | MemoryBudget | None = part_of
        self._lock = threading.Lock()

    @property
    def value(self) -> int:
        return self._value

    def add(self, nbytes: int) -> None:
        """``nbytes`` more are held (fewer, if negative)."""
        with self._lock:
            self._value += nbytes
            if self._part_of is not None:
                self._part_of.add(nbytes)

    def set(self, nbytes: int) -> None:
        with self._lock:
            change, self._value = nbytes - self._value, nbytes
            if self._part_of is not None:
                self._part_of.add(change)

    def count_in(self, budget: MemoryBudget) -> None:
        with self._lock:
            if self._part_of is not None:
                raise ValueError("these bytes are counted already")
            self._part_of = budget
            budget.add(self._value)


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
    """One count of what the node holds and a condition that wakes those
    waiting for room whenever it falls."""

    def __init__(self, limit_bytes: int, instruments: Instruments) -> None:
        if limit_bytes <= 0:
            raise ValueError("the memory limit must be above 0 bytes")
        self.limit_bytes = limit_bytes
        self._held = 0
        """What the parts of the node hold (``hold``), what the calls being
        served reserved, and what admissions under way put into queues."""
        self._room = threading.Condition(threading.Lock())
        held = instruments.gauge(
            "skyoap_memory_held_bytes",
            "bytes of telemetry the node holds, in calls being served and accepted",
        )
        held.set_function(self.held)
        instruments.gauge("skyoap_memory_limit_bytes", "the node's memory budget").set(limit_bytes)
        self._shed = instruments.counter(
            "skyoap_memory_shed_total", "calls and batches refused whole because the memory budget was full"
        )
        self._waited = instruments.counter(
            "skyoap_memory_waited_total", "calls and batches that waited for room in the memory budget"
        )

    def hold(self, held: HeldBytes) -> None:
        """Counts what ``held`` counts, from now on."""
        held.count_in(self)

    def held(self) -> int:
        return self._held

    def add(self, nbytes: int) -> None:
        """``nbytes`` more are held (fewer, if negative: then those waiting
        for room look again)."""
        with self._room:
            self._held += nbytes
            if nbytes < 0:
                self._room.notify_all()

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
        self._take(nbytes, wait_s)
        reservation.nbytes += nbytes

    def release(self) -> None:
        """Frees what the current call reserved: it holds none of it any more
        (a stream that hands each message over before it reads the next)."""
        reservation = _current.get()
        if reservation is not None:
            self._release(reservation)

    def _release(self, reservation: _Reservation) -> None:
        self.add(-reservation.nbytes)
        reservation.nbytes = 0
        reservation.waits_until = None

    @contextlib.contextmanager
    def admission(self, nbytes: int, wait_s: float) -> Iterator[None]:
        """Waits up to ``wait_s`` until ``nbytes`` more fit, and counts them
        while the caller puts its items into their queues (whose counts take
        them over), so that callers admitted together never overrun the
        budget. Raises Overloaded when no room came in time. Within a call,
        all its waits for room (``reserve`` included) end when the first
        would have."""
        self._take(nbytes, wait_s)
        try:
            yield
        finally:
            self.add(-nbytes)

    def _take(self, nbytes: int, wait_s: float) -> None:
        """Counts ``nbytes`` more once they fit in the budget."""
        if nbytes > self.limit_bytes:
            self._shed.inc()
            raise Overloaded(
                f"the call carries more than the node's whole memory budget ({self.limit_bytes} bytes); "
                "send less per call"
            )
        ends_at = time.monotonic() + deadline.remaining(wait_s)
        reservation = _current.get()

        def fits() -> bool:
            return self._held + nbytes <= self.limit_bytes

        with self._room:
            if not fits():
                self._waited.inc()
                if reservation is not None:  # a call's waits for room share one wait
                    if reservation.waits_until is None:
                        reservation.waits_until = ends_at
                    ends_at = min(ends_at, reservation.waits_until)
                if not self._room.wait_for(fits, max(0.0, ends_at - time.monotonic())):
                    self._shed.inc()
                    raise Overloaded(
                        f"the node holds {self._held} bytes of telemetry, and {nbytes} more would pass "
                        f"its memory budget of {self.limit_bytes}"
                    )
            self._held += nbytes
