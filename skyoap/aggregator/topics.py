"""The topics' writers' side: every record, and every version of a row, is
stored with its place on its topic, by the write that stores it.

Before a bulk is written, each item is placed on its partition (the hash of
its routing key) at an offset of a range reserved for the bulk
(``OffsetRanges``: no lock, ranges from every node interleave). The DAO stores
the items with their positions; the worker hands the placement over here.
Every ``interval_s`` the ranges handed over are made readable (one refresh)
and completed, and each partition's end moves to its watermark: the lowest
range still open anywhere holds it back, so a reader never passes an entry
that becomes readable later. Nothing of this runs in the threads that persist.

A row (metrics, inventory) is updated in place, so the version it holds would
vanish from its offset: before the write, that version is copied into the
topic's history at its offset and made readable (``TopicDAO.keep``). A node
that dies at any point loses no version from its topic: a version is on it
from the write that stores it, and its copy is readable before it is
overwritten.

A range passed over while its bulk was being written (its lease ran out, or
Redis lost the partition) may lie below the end already, unseen by readers
that went past it: its records are written again, by id, at a new range, and
its row versions are copied into the history at a new range. So everything
stored is on its topic; a reader may see an entry twice.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from skyoap.model.records import Record
from skyoap.model.stream import StreamData
from skyoap.model.topics import Position, Reservation, Table, Topic, TopicRecord, partition_of
from skyoap.runtime import clock
from skyoap.runtime.budget import HeldBytes
from skyoap.runtime.crash import crash_point
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.storage.api import OffsetRanges, RecordDAO, StorageUnavailable, Stored, TopicDAO

log = logging.getLogger(__name__)


class NotWritten(StorageUnavailable):
    """A write of rows that did not start: their topic could not take them."""


@dataclass
class Placement:
    """Items with their positions, and the ranges the positions come from."""

    table: Table
    items: Sequence[StreamData]
    positions: list[Position] | None
    """None: not placed (yet, or at all: publishing is off)."""
    reservations: list[Reservation] = field(default_factory=list)
    nbytes: int = 0
    written: bool = True
    """False for items placed again, until they are written at their new positions."""
    refused: Collection[str] = ()
    """The keys storage did not take, set by the writer."""


class Topics:
    def __init__(
        self,
        topics: TopicDAO,
        records: RecordDAO,
        ranges: OffsetRanges,
        partitions: dict[Topic, int],
        instruments: Instruments,
        interval_s: float,
    ) -> None:
        self._topics = topics
        self._records = records
        self._ranges = ranges
        self._partitions = partitions
        self._pending: list[Placement] = []
        self._lock = threading.Lock()
        self.held = HeldBytes()
        """The records handed over whose ranges are not completed yet."""
        self._ends: dict[tuple[Topic, int], int] = {}
        """The end each partition was last moved to from here: it is moved
        again only once its watermark passed it."""
        self._task = Periodic("topics", interval_s, self.run_once, "moving the ends of the topics")
        published = instruments.counter(
            "skyoap_topic_published_total", "entries published on a topic", ["topic"]
        )
        self._published = {t: published.labels(topic=t.value) for t in partitions}
        self._kept = instruments.counter(
            "skyoap_topic_kept_total", "row versions copied into their topic's history before an overwrite"
        )
        self._rewritten = instruments.counter(
            "skyoap_topic_rewritten_total", "entries written again at a new range (theirs was passed over)"
        )

    def place(self, table: Table, items: Sequence[StreamData], nbytes: int = 0) -> Placement:
        """Positions for ``items``, from one range per partition they fall in."""
        placement = Placement(table, items, None, nbytes=nbytes)
        self._reserve(placement)
        return placement

    def _reserve(self, placement: Placement) -> None:
        topic = Topic.of(placement.table.model)
        count = self._partitions[topic]
        by_partition: dict[int, list[int]] = {}
        for i, item in enumerate(placement.items):
            by_partition.setdefault(partition_of(item.routing_key(), count), []).append(i)
        now_ms = clock.now_ms()
        positions: list[Position] = [Position(0, 0, 0)] * len(placement.items)
        reservations = []
        for p, indices in by_partition.items():
            r = self._ranges.reserve(
                topic.value, p, len(indices), functools.partial(self._topics.next_offset, topic.value, p)
            )
            reservations.append(r)
            for k, i in enumerate(indices):
                positions[i] = Position(p, r.start + k, now_ms)
        placement.positions, placement.reservations = positions, reservations

    @contextlib.contextmanager
    def writing(
        self, table: Table, rows: Sequence[tuple[Stored[StreamData] | None, StreamData]]
    ) -> Iterator[Placement]:
        """Around a write of rows (each the version read, None for a new row,
        and its new value): places the new values and keeps the versions they
        overwrite in the history first. The writer stores the placement's
        positions and sets its ``refused``; what an exception interrupts may
        have been stored, and is handed over as such."""
        try:
            placement = self.place(table, [new for _, new in rows])
        except Exception as e:
            raise NotWritten(f"no offsets for {table.model.MODEL} rows: {e}") from e
        try:
            self.keep(table, (stored for stored, _ in rows if stored is not None))
        except BaseException as e:
            self.abandoned(placement)
            raise NotWritten(f"the versions {table.model.MODEL} rows held were not kept: {e}") from e
        try:
            yield placement
        finally:
            crash_point("rows-written")
            self.written(placement, placement.refused)

    def keep(self, table: Table, versions: Iterable[Stored[StreamData]]) -> None:
        """Copies the stored ``versions`` into the history at their offsets,
        readable when this returns."""
        kept = self._copy(table, [(v.item, v.position) for v in versions if v.position is not None])
        self._kept.inc(kept)
        crash_point("versions-kept")

    def _copy(self, table: Table, versions: Sequence[tuple[StreamData, Position]]) -> int:
        """Writes row ``versions`` into the history at the positions given; how many."""
        if versions:
            topic = Topic.of(table.model)
            self._topics.keep(
                topic.value,
                [
                    TopicRecord(
                        topic.value,
                        at.partition,
                        at.offset,
                        at.published_ms,
                        item.routing_key(),
                        table.value(item),
                    )
                    for item, at in versions
                ],
            )
        return len(versions)

    def publish_again(self, table: Table, items: Sequence[StreamData]) -> None:
        """Publishes row versions whose own place may have been passed unseen
        (their write's outcome was unknown until now) at a new range, placed
        and written by the next round (not in the caller's thread)."""
        if items:
            with self._lock:
                self._pending.append(Placement(table, items, None, written=False))

    def written(self, placement: Placement, refused: Collection[str] = ()) -> None:
        """Hands over a placement once storage took its items, except the
        keys ``refused``."""
        if refused and placement.positions is not None:
            kept = [
                (i, p)
                for i, p in zip(placement.items, placement.positions, strict=True)
                if i.key() not in refused
            ]
            placement.items = [i for i, _ in kept]
            placement.positions = [p for _, p in kept]
        placement.written = True
        with self._lock:
            self._pending.append(placement)
            self.held.add(placement.nbytes)

    def abandoned(self, placement: Placement) -> None:
        """Hands over a placement whose write was given up: its ranges are
        completed with nothing in them."""
        placement.items, placement.positions = [], []
        self.written(placement)

    def run_once(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            for placement in pending:
                if not placement.written:  # to be placed again
                    if placement.positions is None:
                        self._reserve(placement)
                    self._write_again(placement)
                    placement.written = True
            for topic in {Topic.of(p.table.model) for p in pending}:
                self._topics.make_readable(topic.value)
            crash_point("topics-readable")
            passed = set(self._ranges.complete([r for p in pending for r in p.reservations]))
        except BaseException:
            with self._lock:
                self._pending[:0] = pending
            raise
        again = []
        for p in pending:
            moved = self._place_again(p, passed)
            self._published[Topic.of(p.table.model)].inc(len(p.items) - (len(moved.items) if moved else 0))
            if moved is not None:
                again.append(moved)
        with self._lock:
            self._pending += again
            self.held.add(sum(p.nbytes for p in again) - sum(p.nbytes for p in pending))
        for topic, partitions in self._partitions.items():
            marks = {p: self._ranges.watermark(topic.value, p) for p in range(partitions)}
            ahead = {p: m for p, m in marks.items() if m is not None and m > self._ends.get((topic, p), -1)}
            if ahead:
                self._topics.advance(topic.value, ahead)
                self._ends.update({(topic, p): m for p, m in ahead.items()})

    def _write_again(self, placement: Placement) -> None:
        """Records are written again by id at their new positions; row
        versions are copied into the history there."""
        assert placement.positions is not None
        model = placement.table.model
        if issubclass(model, Record):
            self._records.insert(model, cast(Sequence[Record], placement.items), placement.positions)
        else:
            self._copy(placement.table, list(zip(placement.items, placement.positions, strict=True)))

    def _place_again(self, placement: Placement, passed: set[Reservation]) -> Placement | None:
        """The items of ``placement`` in ranges ``passed``, placed at new
        ranges, to be written there next round."""
        lost_in = {r.partition for r in placement.reservations if r in passed}
        if not lost_in or not placement.positions:
            return None
        lost = [
            i for i, pos in zip(placement.items, placement.positions, strict=True) if pos.partition in lost_in
        ]
        if not lost:
            return None
        log.warning(
            "%d %s entries were in ranges passed over: writing them at new ones",
            len(lost),
            placement.table.model.MODEL,
        )
        self._rewritten.inc(len(lost))
        moved = self.place(placement.table, lost, placement.nbytes * len(lost) // len(placement.items))
        moved.written = False
        return moved

    def start(self) -> None:
        self._task.start()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stops the task after one last round for what was handed over."""
        self._task.close(timeout_s)
        try:
            self.run_once()
        except Exception as e:
            log.warning("the last round of the topics failed: %r", e)


class Unpublished:
    """The row writers' topics when publishing is off: nothing is placed or kept."""

    @contextlib.contextmanager
    def writing(
        self, table: Table, rows: Sequence[tuple[Stored[StreamData] | None, StreamData]]
    ) -> Iterator[Placement]:
        yield Placement(table, [new for _, new in rows], None)

    def keep(self, table: Table, versions: Iterable[Stored[StreamData]]) -> None:
        pass

    def publish_again(self, table: Table, items: Sequence[StreamData]) -> None:
        pass


RowTopics = Topics | Unpublished
