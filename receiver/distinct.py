"""The distinct worker (L1): combines equal items within a drained batch before
anything leaves the node."""

from __future__ import annotations

from typing import TypeVar

from model.stream import StreamData
from runtime.buffer import BufferSpec
from runtime.instruments import Instruments
from runtime.pools import DrainPool
from runtime.worker import BufferedWorker, Worker, combine_by_key

T = TypeVar("T", bound=StreamData)

FLUSH_EVERY = 1000
"""Items consumed after which the combined ones are handed on even mid-batch."""


class DistinctWorker(BufferedWorker[T]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        next_worker: Worker[T],
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        flush_every: int = FLUSH_EVERY,
    ) -> None:
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.next_worker = next_worker
        self.flush_every = flush_every

    def process(self, batch: list[T]) -> None:
        for start in range(0, len(batch), self.flush_every):
            combined = combine_by_key(batch[start : start + self.flush_every])
            self.series.handed_on.inc(len(combined))
            for item in combined.values():
                self.next_worker.accept(item)
