"""Bounded buffer queues (SkyWalking's DataCarrier): items are produced into one
of several channels and drained in batches by a drain pool."""

from __future__ import annotations

import enum
import itertools
import logging
import sys
import threading
import time
import typing
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from skyoap.model.stream import StreamData
from skyoap.runtime import deadline
from skyoap.runtime.budget import HeldBytes, Overloaded, memory_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog

log = logging.getLogger(__name__)
T = TypeVar("T")


class BufferStrategy(enum.Enum):
    """What ``produce`` does when the chosen channel is full."""

    BLOCKING = "blocking"
    """Wait for room: the producer slows down to the drain pool's pace."""
    IF_POSSIBLE = "if_possible"
    """Drop the item at once and count it: the producer never waits."""
    ADMITTED = "admitted"
    """Never full: the node's memory budget admitted the work before it came
    here (``runtime/budget.py``), and the queue's bytes count against it."""


@dataclass(frozen=True)
class BufferSpec:
    """The shape of a worker's buffer queue, as configured."""

    channels: int
    buffer_size: int
    strategy: BufferStrategy
    max_wait_s: float | None = None


class BufferClosed(RuntimeError):
    """Raised by ``produce`` on a queue that is closing."""


class BufferFull(Overloaded):
    """Raised by ``produce`` under BLOCKING when the queue stayed full for its
    ``max_wait_s``, or until the deadline of the call producing: the caller
    should shed the work (tell its client to come back later) rather than hold
    a thread any longer."""


class _Channel(Generic[T]):
    __slots__ = ("bytes", "capacity", "items", "not_full")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: deque[T] = deque()
        self.not_full = threading.Condition(threading.Lock())
        self.bytes = 0
        """ADMITTED queues: the memory size of the items."""


class BufferQueue(Generic[T]):
    """``channels`` bounded channels of ``buffer_size`` items each.

    Producers pick channels round robin. A drain pool drains each channel in
    batches; ``on_data`` (set by the pool) is called when an item arrives so that
    an idle drain thread wakes at once instead of on its next poll.
    """

    def __init__(
        self,
        name: str,
        channels: int,
        buffer_size: int,
        strategy: BufferStrategy,
        instruments: Instruments,
        max_wait_s: float | None = None,
        part_of: HeldBytes | None = None,
    ) -> None:
        """ADMITTED queues count the bytes of their items in ``held``, as part
        of ``part_of``."""
        if channels < 1 or buffer_size < 1:
            raise ValueError(f"buffer queue {name}: channels and buffer_size must be >= 1")
        self.name = name
        self.strategy = strategy
        self.buffer_size = buffer_size
        self.max_wait_s = max_wait_s
        self._admitted = strategy is BufferStrategy.ADMITTED
        self.held = HeldBytes(part_of)
        room = sys.maxsize if self._admitted else buffer_size
        self._channels = [_Channel[T](room) for _ in range(channels)]
        self._next_channel = itertools.count()
        self._closed = False
        self.on_data: Callable[[], None] = lambda: None
        self._dropped = instruments.counter(
            "skyoap_buffer_dropped_total", "items dropped because a buffer queue was full", ["queue"]
        ).labels(queue=name)
        instruments.gauge("skyoap_buffer_depth", "items waiting in a buffer queue", ["queue"]).labels(
            queue=name
        ).set_function(self.depth)
        instruments.gauge("skyoap_buffer_capacity", "capacity of a buffer queue", ["queue"]).labels(
            queue=name
        ).set_function(lambda: self.capacity)
        self._drop_log = RateLimitedLog(log)

    @property
    def channel_count(self) -> int:
        return len(self._channels)

    @property
    def capacity(self) -> int:
        return self.buffer_size * len(self._channels)

    def depth(self) -> int:
        return sum(len(c.items) for c in self._channels)

    def _size(self, items: Sequence[T]) -> int:
        return memory_size(typing.cast(Sequence[StreamData], items)) if self._admitted else 0

    def _count(self, channel: _Channel[T], nbytes: int) -> None:
        """Channel ``channel`` (whose lock the caller holds) holds ``nbytes`` now."""
        if self._admitted:
            self.held.add(nbytes - channel.bytes)
            channel.bytes = nbytes

    def _wait_for_room(self, channel: _Channel[T], ends_at: float | None) -> None:
        if ends_at is not None and time.monotonic() >= ends_at:
            raise BufferFull(
                f"buffer queue {self.name} stayed full for as long as the call could wait "
                f"(at most {self.max_wait_s:g} s)"
            )
        # Wake the drain thread in case it is idle, then wait for room.
        self.on_data()
        channel.not_full.wait(0.1)

    def _deadline(self) -> float | None:
        """When a wait for room ends: after ``max_wait_s``, or by the call's deadline."""
        return None if self.max_wait_s is None else time.monotonic() + deadline.remaining(self.max_wait_s)

    def produce(self, item: T) -> bool:
        """Puts ``item`` into a channel. Returns False if it was dropped (full
        queue under IF_POSSIBLE); raises BufferClosed once the queue is closing
        and BufferFull if it stayed full for ``max_wait_s`` (or the call's deadline)."""
        channel = self._channels[next(self._next_channel) % len(self._channels)]
        ends_at = self._deadline()
        with channel.not_full:
            while len(channel.items) >= channel.capacity:
                if self._closed:
                    raise BufferClosed(f"buffer queue {self.name} is closed")
                if self.strategy is BufferStrategy.IF_POSSIBLE:
                    self._dropped.inc()
                    self._drop_log.warning(
                        self.name,
                        "buffer queue %s is full (%d items): item dropped",
                        self.name,
                        self.capacity,
                    )
                    return False
                self._wait_for_room(channel, ends_at)
            if self._closed:
                raise BufferClosed(f"buffer queue {self.name} is closed")
            channel.items.append(item)
            self._count(channel, channel.bytes + self._size((item,)))
        self.on_data()
        return True

    def produce_many(self, items: Sequence[T]) -> int:
        """Puts ``items`` into one channel, in order, taking its lock once per
        run of room rather than once per item. Returns how many were kept: all
        of them under BLOCKING, those that fitted under IF_POSSIBLE (the rest are
        dropped and counted)."""
        channel = self._channels[next(self._next_channel) % len(self._channels)]
        ends_at = self._deadline()
        done = 0
        with channel.not_full:
            while done < len(items):
                if self._closed:
                    raise BufferClosed(f"buffer queue {self.name} is closed")
                room = channel.capacity - len(channel.items)
                if room <= 0:
                    if self.strategy is BufferStrategy.IF_POSSIBLE:
                        dropped = len(items) - done
                        self._dropped.inc(dropped)
                        self._drop_log.warning(
                            self.name, "buffer queue %s is full: %d items dropped", self.name, dropped
                        )
                        return done
                    self._wait_for_room(channel, ends_at)
                    continue
                taken = items[done : done + room]
                channel.items.extend(taken)
                self._count(channel, channel.bytes + self._size(taken))
                done = min(len(items), done + room)
                self.on_data()
        return done

    def drain(self, channel: int, max_items: int) -> list[T]:
        """Takes up to ``max_items`` from channel ``channel``, oldest first."""
        ch = self._channels[channel]
        with ch.not_full:
            n = min(max_items, len(ch.items))
            batch = [ch.items.popleft() for _ in range(n)]
            # A drain usually empties the channel: no need to size what it took.
            self._count(ch, ch.bytes - self._size(batch) if ch.items else 0)
            if n:
                ch.not_full.notify_all()
        return batch

    def close(self) -> None:
        """Refuses new items; what is queued stays for the pool to drain."""
        self._closed = True
        for ch in self._channels:
            with ch.not_full:
                ch.not_full.notify_all()
