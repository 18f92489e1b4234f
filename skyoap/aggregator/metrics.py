"""The metrics persistent worker (L2 of metrics): merges what receivers send in
memory, and every persistence period adds it to the stored values of its
minute, hour and day (downsampling) in bulk.

What is merged here is a delta, and each delta is added to each level exactly
once, whatever storage does:

- A delta is downsampled into its hour and day once, when its round takes it;
  from then on each level holds its own share of it.
- Every write records the round it comes from in the row (``applied_rounds``:
  writer -> its last round the row includes). A write whose outcome is unknown
  (a timeout: it may still land) leaves its delta *unconfirmed*, with the round
  of that first write. The next round reads the row again: a round of this
  writer at or past that one means the delta is in, and it is dropped; else
  the same delta is written again. Writes are conditional on the version read,
  so of two writes of a delta at most one lands.
- While a key has an unconfirmed delta, newer deltas of the key wait beside
  it, not merged into it; so a round found in the row tells exactly which
  delta it includes.
- A row storage refused to change (a version conflict, a busy server) was
  certainly not written: its delta is merged and written again.
- A delta whose sum with the row, or with the other deltas of its key, would
  pass what storage can hold (a meter's float sum) is left out, counted and
  logged: the row keeps the value it had, never one storage would lose.

What storage did not take by the last round at close is spilled to the node's
spill directory with the rounds of its writes (``runtime/spill.py``), and the
next start stores it under the same writer's name, so that the rows' rounds
still tell which of its writes landed: before a spilled delta is first
written, the file records it as unconfirmed at that write's round.

Every version written is on the metrics topic (``aggregator/topics.py``): a
row is stored at its place on the topic, and the version it overwrites is
kept in the topic's history first.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import uuid
from dataclasses import dataclass

from skyoap.aggregator.spilled import Held, SpilledMetrics
from skyoap.aggregator.topics import NotWritten, RowTopics, Unpublished
from skyoap.model.checks import Reason, Refused
from skyoap.model.metrics import Downsampling, Metrics, merge_into
from skyoap.model.topics import Table
from skyoap.runtime import clock
from skyoap.runtime.budget import HeldBytes, memory_size
from skyoap.runtime.buffer import BufferSpec
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.spill import SpillDir, WorkerSpill
from skyoap.runtime.worker import BufferedWorker
from skyoap.storage.api import MetricsDAO, MetricsWrite, PutOutcome, Stored

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
"""Read-merge-write attempts per round for rows another writer changed."""
ROUNDS_KEPT_MS = 86_400_000
"""How long a row keeps another writer's round. A writer whose write stayed
unconfirmed for longer, while others wrote the row, could add its delta twice."""


@dataclass
class LastRound:
    """Shared by the workers' rounds at close: once storage failed one, the
    others spill what they hold without waiting on storage again."""

    storage_failed: bool = False


class MetricsPersistentWorker(BufferedWorker[Metrics]):
    def __init__(
        self,
        worker_id: int,
        name: str,
        model: type[Metrics],
        dao: MetricsDAO,
        pool: DrainPool,
        instruments: Instruments,
        buffer: BufferSpec,
        max_held_bytes: int,
        topics: RowTopics | None = None,
        spill_dir: SpillDir | None = None,
    ) -> None:
        """``max_held_bytes`` bounds the memory of the deltas held while
        storage does not take them; past it, the oldest are dropped and
        counted. ``topics`` publishes every version written. ``spill_dir``
        keeps what the round at close could not store, for the next start
        (without it, that is dropped and counted)."""
        super().__init__(worker_id, name, pool, instruments, buffer)
        self.model = model
        self._dao = dao
        self.max_held_bytes = max_held_bytes
        self._topics = topics or Unpublished()
        self._tables = {level: Table(model, level) for level in Downsampling}
        self.writer = uuid.uuid4().hex[:16]
        """This worker's name in the rows' rounds: new with every start."""
        self._round = 0
        self._fresh: dict[str, Metrics] = {}
        """Minute deltas taken since the last round began."""
        self._fresh_bytes = HeldBytes(self.held)
        self._held_bytes = HeldBytes(self.held)
        """About what the deltas held for storage take."""
        self._replay_bytes = HeldBytes(self.held)
        """What the deltas an earlier start spilled took when read, until they are stored."""
        self._held = {level: Held() for level in Downsampling}
        self._lock = threading.Lock()
        self._persisting = threading.Lock()
        pending = instruments.gauge(
            "skyoap_metrics_pending", "metric rows an L2 worker holds for storage", ["worker", "level"]
        )
        for level in Downsampling:
            pending.labels(worker=name, level=level.value).set_function(functools.partial(self._count, level))
        self._unconfirmed = instruments.counter(
            "skyoap_metrics_unconfirmed_total",
            "metric rows whose write had an unknown outcome, read again at the next round",
            ["worker"],
        ).labels(worker=name)
        self._error_log = RateLimitedLog(log)
        spill = WorkerSpill(spill_dir, name, instruments, self.series.dropped("closing"))
        self._spilled = SpilledMetrics(model, name, spill, self._replay_bytes)
        self._round_failed = False
        """Whether storage failed a read or write of the last round."""
        self._closing = threading.Event()

    def _count(self, level: Downsampling) -> int:
        fresh = len(self._fresh) if level is Downsampling.MINUTE else 0
        return len(self._held[level]) + self._spilled.count(level) + fresh

    def store_held(self) -> bool:
        """At close: persists what the worker took; True once storage took all
        of it (what an earlier start spilled is not waited for: it stays in
        its file)."""
        self.persist()
        return not (self._round_failed or self._fresh or any(len(h) for h in self._held.values()))

    def process(self, batch: list[Metrics]) -> None:
        size = memory_size(batch)
        with self._lock:
            refused = merge_into(self._fresh, batch)
            self._fresh_bytes.add(size)
        self._left_out(Downsampling.MINUTE, [e for _, e in refused])

    def _next_round(self) -> int:
        """Milliseconds since the epoch, made to rise with every round so that
        a row's rounds can be aged out."""
        self._round = max(self._round + 1, clock.now_ms())
        return self._round

    def persist(self, last: LastRound | None = None) -> None:
        """Adds every held delta to storage; called every persistence period
        and once more on close (``last``), where what storage does not take
        is spilled."""
        with self._persisting, self.series.persist_seconds.time():
            failed_before, self._round_failed = self._round_failed, False
            if last is not None and failed_before:  # storage failed a moment ago: no waiting on it again
                last.storage_failed = True
            with self._lock:
                fresh, self._fresh = self._fresh, {}
                self._held_bytes.add(self._fresh_bytes.value)
                self._fresh_bytes.set(0)
            round_no = self._next_round()
            for level in Downsampling:
                held = self._held[level]
                if level is Downsampling.MINUTE:
                    refused = merge_into(held.waiting, fresh.values())
                else:
                    refused = merge_into(held.waiting, (m.downsampled(level) for m in fresh.values()))
                self._left_out(level, [e for _, e in refused])
                if len(held) and self._may_store(last):
                    self._store(level, held, round_no, self.writer)
            self._bound()
            if last is not None:
                failed = self._round_failed or failed_before
                reason = (
                    "storage_failed" if failed else "storage_down" if last.storage_failed else "storage_busy"
                )
                last.storage_failed |= failed
                self._spilled.keep(self.writer, round_no, self._held, self._held_bytes.value, reason)
                self._held = {level: Held() for level in Downsampling}
                self._held_bytes.set(0)
            else:
                self._spilled.store(self._store, lambda: self._round_failed or self._closing.is_set())

    def interrupt(self) -> None:
        """The node closes: a round under way stops waiting on storage, and
        what it did not store waits for the round at close."""
        self._closing.set()

    def _may_store(self, last: LastRound | None) -> bool:
        """Whether a level is written in this round: not once storage failed
        in it (the next round, or the spill at close, takes what is left)."""
        if last is None:
            return not (self._closing.is_set() or self._round_failed)
        return not (last.storage_failed or self._round_failed)

    def _store(self, level: Downsampling, held: Held, round_no: int, writer: str) -> None:
        """Writes what ``held`` holds, in up to MAX_ATTEMPTS read-merge-write
        attempts; what is left stays held for the next round."""
        keys = list(held.unconfirmed.keys() | held.waiting.keys())
        for _ in range(MAX_ATTEMPTS):
            try:
                stored = self._dao.get_many(self.model, level, keys)
            except Exception as e:  # whatever failed, the deltas stay held
                self._storage_failed(level, len(keys), e)
                return
            writes, from_unconfirmed = self._plan(level, held, keys, stored, round_no, writer)
            if not writes:
                return
            try:
                outcome = self._put(level, writes)
            except NotWritten as e:  # the deltas stay held as they were
                self._storage_failed(level, len(writes), e)
                return
            except Exception as e:  # the writes may or may not have landed
                for w in writes:
                    key = w.value.key()
                    if key not in from_unconfirmed:
                        held.unconfirmed[key] = (round_no, held.waiting.pop(key))
                self._unconfirmed.inc(len(writes))
                self._storage_failed(level, len(writes), e)
                return
            self._settle(level, held, writes, outcome)
            keys = outcome.retry
            if not keys:
                return

    def _put(self, level: Downsampling, writes: list[MetricsWrite[Metrics]]) -> PutOutcome:
        with self._topics.writing(self._tables[level], [(w.stored, w.value) for w in writes]) as placed:
            if placed.positions is not None:
                writes = [
                    dataclasses.replace(w, position=p) for w, p in zip(writes, placed.positions, strict=True)
                ]
            with self.series.write_seconds.time():
                outcome = self._dao.put(self.model, level, writes)
            placed.refused = {*outcome.retry, *outcome.failed}
        return outcome

    def _plan(
        self,
        level: Downsampling,
        held: Held,
        keys: list[str],
        stored: dict[str, Stored[Metrics]],
        round_no: int,
        writer: str,
    ) -> tuple[list[MetricsWrite[Metrics]], set[str]]:
        """The writes of this attempt, and which of them carry an unconfirmed
        delta. An unconfirmed delta the row turns out to include is done with."""
        writes: list[MetricsWrite[Metrics]] = []
        from_unconfirmed: set[str] = set()
        confirmed: list[Metrics] = []
        oldest_kept = round_no - ROUNDS_KEPT_MS
        for key in keys:
            row = stored.get(key)
            rounds = row.rounds if row is not None else {}
            unconfirmed = held.unconfirmed.get(key)
            if row is not None and unconfirmed is not None and rounds.get(writer, 0) >= unconfirmed[0]:
                del held.unconfirmed[key]
                confirmed.append(row.item)
                unconfirmed = None
            if unconfirmed is not None:
                delta = unconfirmed[1]
                from_unconfirmed.add(key)
            elif key in held.waiting:
                delta = held.waiting[key]
            else:
                continue
            try:
                value = row.item.combine(delta) if row is not None else delta
            except Refused as e:  # the row stays as it is, without this delta
                if held.unconfirmed.pop(key, None) is None:
                    del held.waiting[key]
                from_unconfirmed.discard(key)
                self._left_out(level, [e])
                continue
            kept = {w: r for w, r in rounds.items() if r >= oldest_kept}
            writes.append(MetricsWrite(row, value, {**kept, writer: round_no}))
        # Their write's answer was lost: it may have landed after its range
        # was completed, below the end, where readers already passed.
        self._topics.publish_again(self._tables[level], confirmed)
        return writes, from_unconfirmed

    def _settle(
        self, level: Downsampling, held: Held, writes: list[MetricsWrite[Metrics]], outcome: PutOutcome
    ) -> None:
        """Lets go of what was written or refused for good; what storage asked
        to retry stays held as it was."""
        retry = set(outcome.retry)
        for w in writes:
            key = w.value.key()
            if key in retry:
                continue
            if held.unconfirmed.pop(key, None) is None:
                del held.waiting[key]
        self.series.stored("write").inc(len(writes) - len(retry) - len(outcome.failed))
        if outcome.failed:
            self.series.dropped("refused").inc(len(outcome.failed))
            key, reason = next(iter(outcome.failed.items()))
            self._error_log.error(
                f"{self.name}-refused",
                "%s: storage refused %d %s rows, e.g. %r: %s",
                self.name, len(outcome.failed), level.value, key, reason,
            )  # fmt: skip

    def _left_out(self, level: Downsampling, refused: list[Refused]) -> None:
        """Counts and logs the deltas left out of a sum that would overflow."""
        if refused:
            self.series.dropped(Reason.OVERFLOW.value).inc(len(refused))
            self._error_log.error(
                f"{self.name}-overflow",
                "%s: %d %s deltas left out, their rows kept as they were: %s",
                self.name, len(refused), level.value, refused[0],
            )  # fmt: skip

    def _storage_failed(self, level: Downsampling, rows: int, e: Exception) -> None:
        self._round_failed = True
        self._error_log.error(
            f"{self.name}-storage",
            "%s: %d %s rows kept for the next round: %s",
            self.name, rows, level.value, e,
        )  # fmt: skip

    def _bound(self) -> None:
        """Measures what is held, and drops the deltas of the oldest keys past
        ``max_held_bytes``, counted and logged. The memory budget stops
        admitting work long before: this is the last line."""
        sizes: dict[Downsampling, dict[str, int]] = {}
        for level, held in self._held.items():
            sizes[level] = {k: memory_size([delta]) for k, (_, delta) in held.unconfirmed.items()}
            for k, delta in held.waiting.items():  # a key may hold both: they go together
                sizes[level][k] = sizes[level].get(k, 0) + memory_size([delta])
        total = sum(sum(s.values()) for s in sizes.values())
        excess = total - self.max_held_bytes
        dropped = 0
        for level, held in self._held.items():
            for key, size in sizes[level].items():
                if excess <= 0:
                    break
                held.waiting.pop(key, None)
                held.unconfirmed.pop(key, None)
                excess -= size
                total -= size
                dropped += 1
        self._held_bytes.set(total)
        if dropped:
            self.series.dropped("memory_full").inc(dropped)
            self._error_log.error(
                f"{self.name}-full",
                "%s: the metrics held for storage passed %d bytes; the oldest %d rows dropped",
                self.name, self.max_held_bytes, dropped,
            )  # fmt: skip
