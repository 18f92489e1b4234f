"""The persistent worker (L2) of inventory streams: combines again, then stores
each name once, with a sequence id allocated under the global lock. Every
version stored is on the inventory topic (``aggregator/topics.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Generic

from skyoap.aggregator.topics import RowTopics, Unpublished
from skyoap.model.topics import Table
from skyoap.runtime import clock
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.buffer import BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.worker import BufferedWorker, combine_by_key
from skyoap.storage.api import I, InventoryDAO, SequenceAllocator, StorageError

log = logging.getLogger(__name__)

ROUND = BatchPolicy(max_items=1000)
"""Items one storage round (reads, lock, inserts) takes by default."""
MAX_ATTEMPTS = 5


class InventoryPersistentWorker(BufferedWorker[I], Generic[I]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        model: type[I],
        dao: InventoryDAO,
        sequences: SequenceAllocator,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        batch: BatchPolicy = ROUND,
        on_stored: Callable[[type[I], list[I]], None] | None = None,
        topics: RowTopics | None = None,
    ) -> None:
        """``on_stored`` is told of every row inserted, with its id (a mixed
        node feeds its receiver's cache with it). ``topics`` publishes every
        row inserted or changed."""
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.model = model
        self._on_stored = on_stored
        self._topics = topics or Unpublished()
        self._table = Table(model)
        self._dao = dao
        self._sequences = sequences
        self.batch = batch
        self._error_log = RateLimitedLog(log)

    def process(self, batch: list[I]) -> None:
        for chunk in self.batch.chunks(batch):
            pending = combine_by_key(chunk)
            try:
                with self.series.persist_seconds.time():
                    self.persist(pending)
            except StorageError as e:
                # Registration is idempotent and agents retry until they have their
                # ids, so a batch lost to a storage outage comes back on its own.
                self.series.dropped("storage_failed").inc(len(pending))
                self._error_log.error(self.name, "%s: %d items not persisted: %s", self.name, len(pending), e)

    def persist(self, pending: dict[str, I]) -> None:
        """Stores ``pending`` (key -> combined item): updates the rows that exist,
        inserts the missing ones with fresh sequences.

        What the lock guards is the sequence. A row another writer inserted
        since it was read is not read again under the lock: the insert
        creates by key, so it comes back taken and is updated at the next
        attempt (its allocated id stays unused)."""
        for _ in range(MAX_ATTEMPTS):
            missing = self._update_existing(pending)
            if not missing:
                return
            with self._sequences.lock(self.model.SCOPE):
                pending = self._insert(missing)
            if not pending:
                return
        raise StorageError(
            f"{self.name}: {len(pending)} items still conflicting after {MAX_ATTEMPTS} attempts"
        )

    def _update_existing(self, pending: dict[str, I]) -> dict[str, I]:
        """Updates the stored rows among ``pending``; returns those not stored.
        Rows that changed since they were read are read and combined again."""
        for _ in range(MAX_ATTEMPTS):
            stored = self._dao.get_many(self.model, list(pending))
            changes = []
            for key, s in stored.items():
                merged = s.item.combine(pending[key])
                if merged != s.item:
                    changes.append((s, merged))
            conflicted: set[str] = set()
            if changes:
                with self._topics.writing(self._table, changes) as placed:
                    with self.series.write_seconds.time():
                        conflicted = set(self._dao.update(self.model, changes, placed.positions))
                    placed.refused = conflicted
            self.series.stored("update").inc(len(changes) - len(conflicted))
            missing = {k: v for k, v in pending.items() if k not in stored}
            if not conflicted:
                return missing
            pending = {**missing, **{k: pending[k] for k in conflicted}}
        raise StorageError(f"{self.name}: rows kept changing under {MAX_ATTEMPTS} updates")

    def _insert(self, missing: dict[str, I]) -> dict[str, I]:
        """Inserts ``missing`` with fresh sequences; returns what must be tried again."""
        scope = self.model.SCOPE
        ids = self._sequences.allocate(scope, len(missing), lambda: self._dao.max_sequence(self.model))
        if not self._dao.reserve_sequences(self.model, ids[0], ids[-1]):
            # The allocator is behind storage (it lost its state, or another
            # writer raced us without the lock): move it past what is reserved.
            floor = self._dao.max_sequence(self.model)
            log.warning(
                "%s: ids %d..%d are not above the %d already reserved; allocating again",
                self.name,
                ids[0],
                ids[-1],
                floor,
            )
            self._sequences.raise_floor(scope, floor)
            return missing
        now = clock.now_ms()
        items = [
            replace(item, sequence=seq, register_time=item.register_time or now)
            for item, seq in zip(missing.values(), ids, strict=True)
        ]
        with self._topics.writing(self._table, [(None, i) for i in items]) as placed:
            with self.series.write_seconds.time():
                outcome = self._dao.insert(self.model, items, placed.positions)
            placed.refused = set(outcome.key_taken)
        self.series.stored("insert").inc(len(outcome.inserted))
        inserted = set(outcome.inserted)
        stored = [i for i in items if i.key() in inserted]
        if self._on_stored is not None and stored:
            self._on_stored(self.model, stored)
        return {k: missing[k] for k in outcome.key_taken}
