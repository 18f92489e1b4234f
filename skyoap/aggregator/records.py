"""The record persistent worker: writes records in bulk from its queue.
Records are never merged, so they skip the remote hop: the node that received
a segment or a log line stores it.

A bulk storage does not take is tried again until it does (records are
stored by key, so a bulk that landed before its answer was lost is stored
once); meanwhile the queue grows and the node's memory budget holds agents
back. Only closing stops the tries, once the node's grace has passed: what
storage has not taken then is spilled to the node's spill directory
(``runtime/spill.py``) and stored at the next start (by key, so a spilled
record that had landed is stored once).

With ``topics``, each bulk is placed on the model's topic before it is written,
and the write that stores the records publishes them (``aggregator/topics.py``)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from skyoap.aggregator.topics import Placement, Topics
from skyoap.model.records import Record
from skyoap.model.topics import Table
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.budget import HeldBytes, memory_size
from skyoap.runtime.buffer import BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import UNTIL_STORED
from skyoap.runtime.spill import Spill, SpillDir, WorkerSpill
from skyoap.runtime.worker import BufferedWorker
from skyoap.storage.api import RecordDAO, StorageError

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
        spill_dir: SpillDir | None = None,
    ) -> None:
        """``spill_dir`` keeps what storage does not take at close, for the
        next start (without it, that is dropped and counted)."""
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.model = model
        self._dao = dao
        self.bulk = bulk
        self._topics = topics
        self._closing = threading.Event()
        self._in_hand = HeldBytes(self.held)
        """The bulk being written."""
        self._error_log = RateLimitedLog(log)
        self._spill = WorkerSpill(spill_dir, name, instruments, self.series.dropped("closing"))
        self._unstored: list[Record] | None = []
        """Records storage did not take while closing, for the spill (None once spilled)."""
        self._unstored_lock = threading.Lock()
        self._replays: list[tuple[Spill, list[Record]]] | None = None
        self._replay_bytes = HeldBytes(self.held)

    def process(self, batch: list[Record]) -> None:
        chunks = [(chunk, memory_size(chunk)) for chunk in self.bulk.chunks(batch)]
        self._in_hand.set(sum(nbytes for _, nbytes in chunks))
        try:
            for chunk, nbytes in chunks:
                self._write(chunk, nbytes)
        finally:
            self._in_hand.set(0)

    def _write(self, chunk: Sequence[Record], nbytes: int) -> None:
        # Storage failed at close, or the spill is written: no more waiting on it.
        if self._closing.is_set() and self._unstored != []:
            self._keep_unstored(chunk)
            return
        try:
            refused = self._insert(chunk, nbytes, lambda insert: UNTIL_STORED.call(insert, self._closing))
        except Exception as e:
            if isinstance(e, StorageError) and self._closing.is_set():
                self._keep_unstored(chunk)
                self._error_log.error(
                    self.name, "%s: %d records not stored at close: %s", self.name, len(chunk), e
                )
            elif isinstance(e, StorageError):
                self.series.dropped("storage_failed").inc(len(chunk))
                self._error_log.error(self.name, "%s: %d records not stored: %s", self.name, len(chunk), e)
            else:
                self.series.dropped("error").inc(len(chunk))
                log.exception("%s: %d records not stored", self.name, len(chunk))
            return
        self._count_refused(chunk, refused)

    def _insert(
        self,
        chunk: Sequence[Record],
        nbytes: int,
        tries: Callable[[Callable[[], dict[str, str]]], dict[str, str]],
    ) -> dict[str, str]:
        return insert_published(
            self._dao, self.model, chunk, nbytes, self._topics, tries, self.series.write_seconds.time
        )

    def _records_of(self, content: dict[str, Any]) -> list[Record]:
        return [self.model.from_row(row) for row in content["records"]]

    def _count_refused(self, chunk: Sequence[Record], refused: dict[str, str]) -> None:
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
        what storage has not taken is kept for ``spill``, and once storage
        failed nothing more waits on it."""
        self._closing.set()

    def _keep_unstored(self, chunk: Sequence[Record]) -> None:
        with self._unstored_lock:
            if self._unstored is not None:
                self._unstored.extend(chunk)
                return
        # A write still under way when the spill was written (it outlasted the grace).
        self.series.dropped("closing").inc(len(chunk))
        log.error(
            "%s: storage did not take %d records (about %d bytes) after the spill at close: they are lost",
            self.name, len(chunk), memory_size(chunk),
        )  # fmt: skip

    def spill(self) -> None:
        """At close, once the queue is drained: writes the records storage did
        not take to the spill directory; without one, or if the file cannot
        be written, they are dropped, counted and logged with their size."""
        with self._unstored_lock:
            records, self._unstored = self._unstored or [], None
        if not records:
            return
        content = {"model": self.model.MODEL, "records": [r.to_row() for r in records]}
        self._spill.keep(content, len(records), "records", memory_size(records), "storage_failed")

    def apply_spilled(self) -> None:
        """Stores what earlier starts spilled (one try of each bulk; called
        again until it is stored), then removes each spill stored whole. A
        record is stored by key: one that had landed, or that a start killed
        meanwhile stored, is stored once."""
        if self._replays is None:
            self._replays = self._spill.take(self.model.MODEL, self._records_of)
            self._replay_bytes.set(sum(memory_size(records) for _, records in self._replays))
        while self._replays and not self._closing.is_set():
            spill, records = self._replays[0]
            for chunk in list(self.bulk.chunks(records)):
                nbytes = memory_size(chunk)
                try:
                    refused = self._insert(chunk, nbytes, lambda insert: insert())
                except StorageError as e:
                    self._error_log.error(
                        f"{self.name}-spill", "%s: spilled records wait for storage: %s", self.name, e
                    )
                    return
                self._count_refused(chunk, refused)
                self._spill.applied.inc(len(chunk))
                del records[: len(chunk)]  # stored: the next try starts after it
                self._replay_bytes.add(-nbytes)
            spill.done()
            self._replays.pop(0)
            log.info("%s: stored what %s held", self.name, spill.path)


def _once(insert: Callable[[], dict[str, str]]) -> dict[str, str]:
    return insert()


def insert_published(
    dao: RecordDAO,
    model: type[Record],
    chunk: Sequence[Record],
    nbytes: int,
    topics: Topics | None,
    tries: Callable[[Callable[[], dict[str, str]]], dict[str, str]] = _once,
    timer: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> dict[str, str]:
    """Places ``chunk`` on its topic (with ``topics``) and inserts it, tried
    as ``tries`` says, each write timed by ``timer``; returns what storage
    refused for good. The chunk is placed once: a retry writes the same
    positions."""
    placement: Placement | None = None

    def insert() -> dict[str, str]:
        nonlocal placement
        if placement is None and topics is not None:
            placement = topics.place(Table(model), chunk, nbytes)
        with timer():
            return dao.insert(model, chunk, placement.positions if placement else None)

    try:
        refused = tries(insert)
    except Exception:
        if placement is not None and topics is not None:  # its ranges hold nothing now
            topics.abandoned(placement)
        raise
    if placement is not None and topics is not None:
        topics.written(placement, refused)
    return refused
