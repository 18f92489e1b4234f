"""The worker base: one step of a stream's chain (L1 combine, remote hop, L2
persist), each known by a fixed id so that other nodes can address it."""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable
from typing import Generic, TypeVar

from model.stream import StreamData
from runtime.buffer import BufferQueue, BufferSpec
from runtime.instruments import Instruments
from runtime.pools import DrainPool

T = TypeVar("T", bound=StreamData)


class UnknownWorker(LookupError):
    pass


class Worker(abc.ABC, Generic[T]):
    def __init__(self, worker_id: int, name: str) -> None:
        self.worker_id = worker_id
        self.name = name

    @abc.abstractmethod
    def accept(self, item: T) -> None:
        """Takes one item; returns without waiting for the item to be processed."""

    def accept_many(self, items: list[T]) -> None:
        """Takes several items, in order."""
        for item in items:
            self.accept(item)


class Workers:
    """The workers of one node by id: where the RemoteService and the self
    client find the next worker named in a message."""

    def __init__(self) -> None:
        self._by_id: dict[int, Worker[StreamData]] = {}
        self._lock = threading.Lock()

    def register(self, worker: Worker[T]) -> None:
        with self._lock:
            other = self._by_id.setdefault(worker.worker_id, worker)  # type: ignore[arg-type]
            if other is not worker:
                raise ValueError(f"workers {worker.name} and {other.name} share id {worker.worker_id}")

    def get(self, worker_id: int) -> Worker[StreamData]:
        try:
            return self._by_id[worker_id]
        except KeyError:
            raise UnknownWorker(f"no worker with id {worker_id} on this node") from None


def combine_by_key(items: Iterable[T]) -> dict[str, T]:
    """Folds items with equal keys into one with their ``combine``."""
    combined: dict[str, T] = {}
    for item in items:
        k = item.key()
        prev = combined.get(k)
        combined[k] = item if prev is None else prev.combine(item)  # type: ignore[attr-defined]
    return combined


class BufferedWorker(Worker[T]):
    """A worker whose ``accept`` only enqueues; its own buffer queue is drained in
    batches by a shared drain pool, which calls ``consume``."""

    def __init__(
        self,
        worker_id: int,
        name: str,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
    ) -> None:
        super().__init__(worker_id, name)
        self.queue: BufferQueue[T] = BufferQueue(
            name, buffer.channels, buffer.buffer_size, buffer.strategy, instruments, buffer.max_wait_s
        )
        pool.register(self.queue, self)

    def accept(self, item: T) -> None:
        self.queue.produce(item)

    def accept_many(self, items: list[T]) -> None:
        self.queue.produce_many(items)

    @abc.abstractmethod
    def handle_batch(self, batch: list[T]) -> None: ...
