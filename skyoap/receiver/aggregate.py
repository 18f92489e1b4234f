"""The metrics aggregate worker (L1 of metrics): merges the values of each key
a receiver computes for ``flush_period_s`` before handing them on, so that a
key hit by a thousand spans leaves the node as one item per period."""

from __future__ import annotations

import logging
import threading
import time

from skyoap.model.checks import Reason
from skyoap.model.metrics import Metrics, merge_into
from skyoap.runtime.budget import HeldBytes, memory_size
from skyoap.runtime.buffer import BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.worker import BufferedWorker, Worker

log = logging.getLogger(__name__)


class MetricsAggregateWorker(BufferedWorker[Metrics]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        next_worker: Worker[Metrics],
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        flush_period_s: float,
    ) -> None:
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.next_worker = next_worker
        self.flush_period_s = flush_period_s
        self._merged: dict[str, Metrics] = {}
        self._merged_bytes = HeldBytes(self.held)
        """At most what the merged values take: merging only shrinks them."""
        self._lock = threading.Lock()
        self._flushed_at = time.monotonic()
        self._overflowed = self.series.dropped(Reason.OVERFLOW.value)
        self._log = RateLimitedLog(log)

    def process(self, batch: list[Metrics]) -> None:
        size = memory_size(batch)
        with self._lock:
            refused = merge_into(self._merged, batch)
            self._merged_bytes.add(size)
        if refused:
            self._overflowed.inc(len(refused))
            self._log.warning(
                f"{self.name}-overflow",
                "%s: %d values left out of their sums: %s",
                self.name,
                len(refused),
                refused[0][1],
            )
        self.flush(due_only=True)

    def flush(self, due_only: bool = False) -> None:
        """Hands on what was merged; with ``due_only``, only once the flush
        period has passed since the last flush."""
        with self._lock:
            now = time.monotonic()
            if due_only and now - self._flushed_at < self.flush_period_s:
                return
            merged, self._merged, self._flushed_at = self._merged, {}, now
            self._merged_bytes.set(0)
        if merged:
            self.series.handed_on.inc(len(merged))
            self.next_worker.accept_many(list(merged.values()))
