"""The record persistent worker: writes records in bulk from its queue.
Records are never merged, so they skip the remote hop: the node that received
a segment or a log line stores it.

A bulk storage does not take is tried again until it does (records are
stored by key, so a bulk that landed before its answer was lost is stored
once); meanwhile the queue grows and the node's memory budget holds agents
back. Only closing stops the tries, once the node's grace has passed.

With ``topics``, each bulk is placed on the model's topic before it is written,
and the write that stores the records publishes them (``aggregator/topics.py``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from aggregator.topics import Placement, Topics
from model.records import Record
from model.topics import Table
from runtime.batching import BatchPolicy
from runtime.budget import memory_size
from runtime.buffer import BufferSpec
from runtime.instruments import Instruments
from runtime.pools import DrainPool
from runtime.ratelimit import RateLimitedLog
from runtime.retry import UNTIL_STORED
from runtime.worker import BufferedWorker
from storage.api import RecordDAO, StorageError

log = logging.getLogger(__name__)


class RecordPersistentWorker(BufferedWorker[Record]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        model: type[Record],
        dao: RecordDAO,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        bulk: BatchPolicy,
        topics: Topics | None = None,
    ) -> None:
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.model = model
        self._dao = dao
        self.bulk = bulk
        self._topics = topics
        self._closing = threading.Event()
        self._in_hand = 0
        self._error_log = RateLimitedLog(log)

    def held_bytes(self) -> int:
        """What the worker holds in memory: its queue and the bulk in hand."""
        return self.queue.bytes() + self._in_hand

    def process(self, batch: list[Record]) -> None:
        chunks = [(chunk, memory_size(chunk)) for chunk in self.bulk.chunks(batch)]
        self._in_hand = sum(nbytes for _, nbytes in chunks)
        try:
            for chunk, nbytes in chunks:
                self._write(chunk, nbytes)
        finally:
            self._in_hand = 0

    def _write(self, chunk: Sequence[Record], nbytes: int) -> None:
        placement: Placement | None = None

        def insert() -> dict[str, str]:
            nonlocal placement
            if placement is None and self._topics is not None:  # once: a retry writes the same positions
                placement = self._topics.place(Table(self.model), chunk, nbytes)
            with self.series.write_seconds.time():
                return self._dao.insert(self.model, chunk, placement.positions if placement else None)

        try:
            refused = UNTIL_STORED.call(insert, self._closing)
        except Exception as e:
            if placement is not None and self._topics is not None:  # its ranges hold nothing now
                self._topics.abandoned(placement)
            if isinstance(e, StorageError):
                reason = "closing" if self._closing.is_set() else "storage_failed"
                self.series.dropped(reason).inc(len(chunk))
                self._error_log.error(self.name, "%s: %d records not stored: %s", self.name, len(chunk), e)
            else:
                self.series.dropped("error").inc(len(chunk))
                log.exception("%s: %d records not stored", self.name, len(chunk))
            return
        if placement is not None and self._topics is not None:
            self._topics.written(placement, refused)
        self.series.stored("write").inc(len(chunk) - len(refused))
        if refused:
            self.series.dropped("refused").inc(len(refused))
            key, reason = next(iter(refused.items()))
            self._error_log.error(
                f"{self.name}-refused", "%s: storage refused %d records, e.g. %r: %s",
                self.name, len(refused), key, reason,
            )  # fmt: skip

    def interrupt_retries(self) -> None:
        """Stops waiting to retry (the node closes, and its grace has passed):
        what storage has not taken is dropped, and counted as dropped while
        ``closing``."""
        self._closing.set()
