"""The worker base: one step of a stream's chain (L1 combine, remote hop, L2
persist), each known by a fixed id so that other nodes can address it."""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterable
from typing import Generic, TypeVar

from prometheus_client import Counter

from skyoap.model.stream import StreamData
from skyoap.runtime.budget import HeldBytes
from skyoap.runtime.buffer import BufferQueue, BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool

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


class WorkerSeries:
    """The series every buffered worker has, each labelled with its name; a
    worker uses those its stage needs."""

    def __init__(self, instruments: Instruments, worker: str) -> None:
        self.received = instruments.counter(
            "skyoap_worker_received_total", "items a worker took from its buffer queue", ["worker"]
        ).labels(worker=worker)
        self.handed_on = instruments.counter(
            "skyoap_worker_handed_on_total",
            "combined items an L1 worker handed to the next worker",
            ["worker"],
        ).labels(worker=worker)
        self._stored = instruments.counter(
            "skyoap_worker_stored_total", "rows or records a worker stored (op: insert, update, write)",
            ["worker", "op"],
        )  # fmt: skip
        self._dropped = instruments.counter(
            "skyoap_worker_dropped_total", "items a worker could not store, by reason", ["worker", "reason"]
        )
        self.persist_seconds = instruments.histogram(
            "skyoap_worker_persist_seconds", "one L2 persistence round: reads, merges and writes", ["worker"]
        ).labels(worker=worker)
        self.write_seconds = instruments.histogram(
            "skyoap_storage_write_seconds", "one bulk write to storage", ["worker"]
        ).labels(worker=worker)
        self._worker = worker

    def stored(self, op: str) -> Counter:
        return self._stored.labels(worker=self._worker, op=op)

    def dropped(self, reason: str) -> Counter:
        return self._dropped.labels(worker=self._worker, reason=reason)


class BufferedWorker(Worker[T]):
    """A worker whose ``accept`` only enqueues; its own buffer queue is drained in
    batches by a shared drain pool, which calls ``handle_batch``."""

    def __init__(
        self,
        worker_id: int,
        name: str,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
    ) -> None:
        super().__init__(worker_id, name)
        self.held = HeldBytes()
        """What the worker holds in memory: its queue and what it took from it."""
        self.queue: BufferQueue[T] = BufferQueue(
            name, buffer.channels, buffer.buffer_size, buffer.strategy, instruments, buffer.max_wait_s,
            part_of=self.held,
        )  # fmt: skip
        self.series = WorkerSeries(instruments, name)
        pool.register(self.queue, self)

    def accept(self, item: T) -> None:
        self.queue.produce(item)

    def accept_many(self, items: list[T]) -> None:
        self.queue.produce_many(items)

    def handle_batch(self, batch: list[T]) -> None:
        """Called by the pool with each drained batch."""
        self.series.received.inc(len(batch))
        self.process(batch)

    @abc.abstractmethod
    def process(self, batch: list[T]) -> None:
        """Does the worker's step on one drained batch, in order."""
