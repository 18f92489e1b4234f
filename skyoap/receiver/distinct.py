"""The distinct worker (L1): combines equal items within a drained batch before
anything leaves the node."""

from __future__ import annotations

from typing import TypeVar

from skyoap.model.stream import StreamData
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.buffer import BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.worker import BufferedWorker, Worker, combine_by_key

T = TypeVar("T", bound=StreamData)

HAND_ON = BatchPolicy(max_items=1000)
"""Items combined after which they are handed on, even mid-drain."""


class DistinctWorker(BufferedWorker[T]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        next_worker: Worker[T],
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        batch: BatchPolicy = HAND_ON,
    ) -> None:
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.next_worker = next_worker
        self.batch = batch

    def process(self, batch: list[T]) -> None:
        for chunk in self.batch.chunks(batch):
            combined = combine_by_key(chunk)
            self.series.handed_on.inc(len(combined))
            for item in combined.values():
                self.next_worker.accept(item)
