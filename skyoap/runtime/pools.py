"""Drain pools (SkyWalking's BulkConsumePool): a named, fixed set of threads
shared by every buffer queue registered with the pool."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol, TypeVar

from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.buffer import BufferQueue
from skyoap.runtime.instruments import Instruments

log = logging.getLogger(__name__)

DRAIN = BatchPolicy(max_items=10_000)
"""Items one pass takes from a channel at most."""
T = TypeVar("T")


class BatchHandler(Protocol[T]):
    def handle_batch(self, batch: list[T]) -> None:
        """Handles one drained batch; the end of the list is the end of the batch."""


class _Assignment:
    __slots__ = ("channel", "handler", "queue")

    def __init__(self, queue: BufferQueue[Any], channel: int, handler: BatchHandler[Any]) -> None:
        self.queue = queue
        self.channel = channel
        self.handler = handler


class DrainPool:
    """``size`` threads that drain the channels assigned to them in batches.

    Each channel of a registered queue goes to the thread with the fewest
    channels, so one thread may serve channels of several queues, and a channel
    is only ever drained by one thread (batches of one channel stay in order).
    """

    def __init__(self, name: str, size: int, instruments: Instruments, drain: BatchPolicy = DRAIN) -> None:
        if size < 1:
            raise ValueError(f"drain pool {name}: size must be >= 1")
        self.name = name
        self.size = size
        self.drain = drain
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        # Copy-on-write per thread, so registering a queue never races a drain pass.
        self._assigned: list[tuple[_Assignment, ...]] = [() for _ in range(size)]
        self._queues: list[BufferQueue[Any]] = []
        self._threads: list[threading.Thread] = []
        self._errors = instruments.counter(
            "skyoap_pool_errors_total", "batches whose handler raised", ["pool"]
        ).labels(pool=name)
        instruments.gauge("skyoap_pool_depth", "items waiting in the queues a pool drains", ["pool"]).labels(
            pool=name
        ).set_function(self.depth)
        instruments.gauge("skyoap_pool_threads", "threads of a drain pool", ["pool"]).labels(
            pool=name
        ).set_function(lambda: size)

    def register(self, queue: BufferQueue[Any], handler: BatchHandler[Any]) -> None:
        with self._lock:
            for channel in range(queue.channel_count):
                slot = min(range(self.size), key=lambda i: len(self._assigned[i]))
                self._assigned[slot] = (*self._assigned[slot], _Assignment(queue, channel, handler))
            self._queues.append(queue)
        queue.on_data = self._wake.set

    def depth(self) -> int:
        return sum(q.depth() for q in self._queues)

    def start(self) -> None:
        with self._lock:
            if self._threads:
                return
            for i in range(self.size):
                t = threading.Thread(target=self._run, args=(i,), name=f"{self.name}-{i}", daemon=True)
                self._threads.append(t)
                t.start()

    def _drain_once(self, slot: int) -> bool:
        worked = False
        for a in self._assigned[slot]:
            batch = a.queue.drain(a.channel, self.drain.max_items)
            if not batch:
                continue
            worked = True
            try:
                a.handler.handle_batch(batch)
            except Exception:
                self._errors.inc()
                log.exception("drain pool %s: a batch of %d items failed", self.name, len(batch))
        return worked

    def _run(self, slot: int) -> None:
        while not self._stopping.is_set():
            # Clear before scanning: an item produced during the scan sets the
            # event again, so the wait below returns at once.
            self._wake.clear()
            if not self._drain_once(slot):
                self._wake.wait(0.05)
        while self._drain_once(slot):  # what was queued before close() still goes through
            pass

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops the threads after they drained what their queues hold, within
        ``timeout_s`` in all. Idempotent."""
        for q in self._queues:
            q.close()
        self._stopping.set()
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                log.warning("drain pool %s: thread %s did not stop in time", self.name, t.name)
