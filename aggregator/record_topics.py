"""Records on their topics: a segment or log line is written once, in a
document that is both the stored record and its topic entry.

Before a bulk is written, each of its records is placed on its partition (the
hash of its key) at an offset of a range reserved for the bulk
(``OffsetRanges``: no lock, ranges from every node interleave). The bulk
stores the records with their positions; the worker hands the placement over
here. Every ``interval_s`` the ranges handed over are made readable (one
refresh) and completed, and each partition's end moves to its watermark: the
lowest range still open anywhere holds it back, so a reader never passes a
record that becomes readable later.

A range passed over while its bulk was being written (its lease ran out, or
Redis lost the partition) may lie below the end already, unseen by readers
that went past it: its records are written again, by id, at a new range. So
every stored record is on its topic; a reader may see one twice.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from model.records import Record
from model.topics import Position, Reservation, Topic, partition_of
from runtime.instruments import Instruments
from runtime.periodic import Periodic
from storage.api import OffsetRanges, RecordDAO, TopicDAO

log = logging.getLogger(__name__)


@dataclass
class Placement:
    """Records with their positions, and the ranges the positions come from."""

    model: type[Record]
    items: Sequence[Record]
    positions: list[Position]
    reservations: list[Reservation]
    nbytes: int
    written: bool = True
    """False for records placed again, until they are written at their new positions."""


class RecordTopics:
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
        self._partitions = {t: n for t, n in partitions.items() if t.of_records}
        self._pending: list[Placement] = []
        self._lock = threading.Lock()
        self._held = 0
        self._ends: dict[tuple[Topic, int], int] = {}
        """The end each partition was last moved to from here: it is moved
        again only once its watermark passed it."""
        self._task = Periodic("record-topics", interval_s, self.run_once, "moving the ends of record topics")
        self._published = {
            t: instruments.counter(
                "skyoap_topic_published_total", "records published on a topic", ["topic"]
            ).labels(topic=t.value)
            for t in self._partitions
        }
        self._rewritten = instruments.counter(
            "skyoap_topic_rewritten_total", "records written again at a new range (theirs was passed over)"
        )

    def place(self, model: type[Record], items: Sequence[Record], nbytes: int) -> Placement:
        """Positions for ``items``, from one range per partition they fall in."""
        topic = Topic(model.MODEL)
        count = self._partitions[topic]
        by_partition: dict[int, list[int]] = {}
        for i, item in enumerate(items):
            by_partition.setdefault(partition_of(item.routing_key(), count), []).append(i)
        now_ms = int(time.time() * 1000)
        positions: list[Position] = [Position(0, 0, 0)] * len(items)
        reservations = []
        for p, indices in by_partition.items():
            r = self._ranges.reserve(
                topic.value, p, len(indices), functools.partial(self._topics.next_offset, topic.value, p)
            )
            reservations.append(r)
            for k, i in enumerate(indices):
                positions[i] = Position(p, r.start + k, now_ms)
        return Placement(model, items, positions, reservations, nbytes)

    def written(self, placement: Placement, refused: Collection[str] = ()) -> None:
        """Hands over a placement once storage took its records, except the
        keys ``refused``."""
        if refused:
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
            self._held += placement.nbytes

    def abandoned(self, placement: Placement) -> None:
        """Hands over a placement whose write was given up: its ranges are
        completed with nothing in them."""
        placement.items, placement.positions = [], []
        self.written(placement)

    def held_bytes(self) -> int:
        """The records handed over whose ranges are not completed yet."""
        return self._held

    def run_once(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            for placement in pending:
                if not placement.written:  # records of a passed-over range, placed again
                    self._records.insert(placement.model, placement.items, placement.positions)
                    placement.written = True
            for model in {p.model for p in pending}:
                self._topics.make_readable(model.MODEL)
            passed = set(self._ranges.complete([r for p in pending for r in p.reservations]))
        except BaseException:
            with self._lock:
                self._pending[:0] = pending
            raise
        again = []
        for p in pending:
            moved = self._place_again(p, passed)
            self._published[Topic(p.model.MODEL)].inc(len(p.items) - (len(moved.items) if moved else 0))
            if moved is not None:
                again.append(moved)
        with self._lock:
            self._pending += again
            self._held += sum(p.nbytes for p in again) - sum(p.nbytes for p in pending)
        for topic, partitions in self._partitions.items():
            for partition in range(partitions):
                mark = self._ranges.watermark(topic.value, partition)
                if mark is not None and mark > self._ends.get((topic, partition), -1):
                    self._topics.advance(topic.value, partition, mark)
                    self._ends[(topic, partition)] = mark

    def _place_again(self, placement: Placement, passed: set[Reservation]) -> Placement | None:
        """The records of ``placement`` in ranges ``passed``, placed at new
        ranges, to be written there next round (by id, so each is stored once)."""
        lost_in = {r.partition for r in placement.reservations if r in passed}
        if not lost_in:
            return None
        lost = [
            i for i, pos in zip(placement.items, placement.positions, strict=True) if pos.partition in lost_in
        ]
        if not lost:
            return None
        log.warning(
            "%d %s records were in ranges passed over: writing them at new ones",
            len(lost),
            placement.model.MODEL,
        )
        self._rewritten.inc(len(lost))
        moved = self.place(placement.model, lost, placement.nbytes * len(lost) // len(placement.items))
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
            log.warning("the last round of the record topics failed: %r", e)
