"""Offset ranges of the embedded storage, kept in the node's memory: one node
writes the file, so no other process hands out its offsets. A restarted node
counts on from what the file holds."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence

from skyoap.model.topics import Reservation


class LocalOffsetRanges:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[tuple[str, int], int] = {}
        self._open: dict[tuple[str, int], set[int]] = {}
        self._epoch = uuid.uuid4().hex

    def reserve(self, topic: str, partition: int, count: int, floor: Callable[[], int]) -> Reservation:
        if count < 1:
            raise ValueError(f"a range holds at least one offset, not {count}")
        tp = (topic, partition)
        with self._lock:
            if tp not in self._next:
                self._next[tp] = floor()
            start = self._next[tp]
            self._next[tp] = start + count
            self._open.setdefault(tp, set()).add(start)
        return Reservation(topic, partition, start, start + count, self._epoch)

    def complete(self, reservations: Sequence[Reservation]) -> list[Reservation]:
        with self._lock:
            for r in reservations:
                self._open[(r.topic, r.partition)].discard(r.start)
        return []  # a range is never passed over: its writer is this process

    def watermark(self, topic: str, partition: int) -> int | None:
        tp = (topic, partition)
        with self._lock:
            if tp not in self._next:
                return None
            return min(self._open[tp], default=self._next[tp])

    def close(self) -> None:
        pass
