"""What a consumer reads, shared by the three parts of the client (aiokafka's
``SubscriptionState``): the caller's ``poll``, the fetcher that fills the
read-ahead buffers, and the membership that changes what is owned and
commits it.

One condition guards everything here. The fetcher waits on nothing in it; the
caller's ``poll`` waits on it and is woken when records arrive, when the group
grants change, or when the consumer closes. Callbacks and storage calls never
run under it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from skyoap.consumer.group import ChannelState, CommitRefused, Grant, channel_name
from skyoap.model.topics import Fetched, TopicRecord


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return channel_name(self.topic, self.partition)


Work = dict[TopicPartition, tuple[int, int | None]]
"""What a commit records: partition → (last offset processed, version of its ownership)."""


@dataclass(eq=False)
class PartitionState:
    """A partition this consumer reads: where the caller is (``position``), where
    the fetcher is (``fetch_at``), what it fetched ahead, and the fetch error
    the caller has not dealt with yet.

    Identity matters: the fetcher holds on to the object while it reads
    without the lock, and drops what it read if the partition was revoked
    (another object, or none, is there now) or sought meanwhile."""

    version: int | None
    position: int
    fetch_at: int
    committed: int | None = None
    buffer: collections.deque[TopicRecord] = field(default_factory=collections.deque)
    error: Exception | None = None
    retry_at: float = 0.0
    """``time.monotonic()`` before which the fetcher leaves the partition alone (after a failed read)."""

    def move_to(self, offset: int) -> None:
        self.position = self.fetch_at = offset
        self.buffer.clear()
        self.error = None
        self.retry_at = 0.0


class SubscriptionState:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._owned: dict[TopicPartition, PartitionState] = {}
        self._grants: dict[str, Grant] | None = None
        """What the group last granted this member; None while it is not a member."""
        self._released: set[str] = set()
        self._interrupted = False
        self._closed = False

    # What is owned.

    def assigned(self) -> set[TopicPartition]:
        with self._changed:
            return set(self._owned)

    def owns_any(self) -> bool:
        with self._changed:
            return bool(self._owned)

    def add(self, partitions: Mapping[TopicPartition, PartitionState]) -> None:
        with self._changed:
            self._owned.update(partitions)
            self._changed.notify_all()

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        with self._changed:
            for tp in partitions:
                self._owned.pop(tp, None)

    def position(self, tp: TopicPartition) -> int:
        with self._changed:
            return self._state(tp).position

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._changed:
            self._state(tp).move_to(offset)

    def _state(self, tp: TopicPartition) -> PartitionState:
        owned = self._owned.get(tp)
        if owned is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return owned

    # The caller's side of the read-ahead buffers.

    def wait_for_records(self, max_records: int, deadline: float) -> list[TopicRecord]:
        """Up to ``max_records`` buffered records; waits for the first until
        ``deadline`` (``time.monotonic()``), and returns none early when the
        group's grants ask for a change that ``poll`` has to apply first, or
        when a background part failed (the next ``poll`` raises it)."""
        with self._changed:
            self._interrupted = False
            while True:
                batch = self._take(max_records)
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0 or self._closed:
                    return batch
                self._changed.wait(remaining)
                if self._interrupted or self._rebalance_pending():
                    return []

    def _take(self, max_records: int) -> list[TopicRecord]:
        out: list[TopicRecord] = []
        for owned in self._owned.values():
            while owned.buffer and len(out) < max_records:
                record = owned.buffer.popleft()
                out.append(record)
                owned.position = record.offset + 1
            if not owned.buffer:  # past the gaps the fetches found, too
                owned.position = owned.fetch_at
        return out

    # The fetcher's side.

    def to_fetch(self, fetch_size: int, now: float) -> list[tuple[TopicPartition, PartitionState, int]]:
        """The partitions whose buffers are not full, with the offset to read from."""
        with self._changed:
            return [
                (tp, o, o.fetch_at)
                for tp, o in self._owned.items()
                if len(o.buffer) < fetch_size and o.retry_at <= now
            ]

    def fetched(self, tp: TopicPartition, owned: PartitionState, offset: int, fetched: Fetched) -> int:
        """Buffers what a read from ``offset`` returned, unless the partition
        was revoked or sought meanwhile; returns how many records it kept."""
        with self._changed:
            if not self._current(tp, owned, offset):
                return 0
            owned.error = None
            owned.buffer.extend(fetched.records)
            owned.fetch_at = fetched.next_offset
            if fetched.records:
                self._changed.notify_all()
            return len(fetched.records)

    def reset(self, tp: TopicPartition, owned: PartitionState, offset: int, to: int) -> bool:
        """Moves a partition whose read from ``offset`` was out of range to
        ``to``; False if it was revoked or sought meanwhile."""
        with self._changed:
            if not self._current(tp, owned, offset):
                return False
            owned.move_to(to)
            return True

    def fetch_failed(
        self,
        tp: TopicPartition,
        owned: PartitionState,
        offset: int,
        retry_at: float,
        error: Exception | None = None,
    ) -> bool:
        """Holds the partition back until ``retry_at``; ``error`` is for the
        caller (``first_error``) until a read works or the partition is sought.
        Returns whether ``error`` is new (it was not already pending)."""
        with self._changed:
            if not self._current(tp, owned, offset):
                return False
            owned.retry_at = retry_at
            new = error is not None and owned.error is None
            if error is not None:
                owned.error = error
                self._interrupt()
            return new

    def first_error(self) -> Exception | None:
        with self._changed:
            return next((o.error for _, o in sorted(self._owned.items()) if o.error is not None), None)

    def _current(self, tp: TopicPartition, owned: PartitionState, offset: int) -> bool:
        return self._owned.get(tp) is owned and owned.fetch_at == offset

    # Commits.

    def commit_work(self, offsets: Mapping[TopicPartition, int] | None) -> Work:
        """What committing ``offsets`` records, with each partition's version; by
        default the last offset ``poll`` returned of every partition whose
        commit it would change."""
        with self._changed:
            if offsets is None:
                offsets = {
                    tp: o.position - 1 for tp, o in self._owned.items() if o.position - 1 != o.committed
                }
            unowned = [tp for tp in offsets if tp not in self._owned]
            if unowned:
                raise CommitRefused(
                    f"cannot commit {', '.join(map(str, unowned))}: not assigned to this consumer"
                )
            return {tp: (offset, self._owned[tp].version) for tp, offset in offsets.items()}

    def committed(self, work: Work) -> None:
        with self._changed:
            for tp, (offset, _) in work.items():
                if tp in self._owned:
                    self._owned[tp].committed = offset

    # The group's grants.

    def granted(self, grants: Mapping[str, Grant], released: Iterable[str] = ()) -> None:
        """Records what the group granted, once it took back ``released``."""
        with self._changed:
            self._grants = dict(grants)
            self._released.difference_update(released)
            self._changed.notify_all()

    def snapshot(self) -> tuple[dict[str, Grant], dict[TopicPartition, int | None]]:
        """The grants and what is owned (partition → version), read together."""
        with self._changed:
            return dict(self._grants or {}), {tp: o.version for tp, o in self._owned.items()}

    def release(self, channels: Iterable[str]) -> None:
        """Channels to hand back to the group at the next heartbeat."""
        with self._changed:
            self._released.update(channels)

    def to_release(self) -> frozenset[str]:
        with self._changed:
            return frozenset(self._released)

    def rebalance_pending(self) -> bool:
        with self._changed:
            return self._rebalance_pending()

    def _rebalance_pending(self) -> bool:
        """Whether the grants ask for anything ``poll`` has not applied (lock held)."""
        if self._grants is None:
            return False
        opened = {n for n, g in self._grants.items() if g.state is ChannelState.OPEN}
        return opened != {str(tp) for tp in self._owned}

    # Waking the caller.

    def interrupt(self) -> None:
        """Makes a waiting ``poll`` return now: a background part failed, and the
        next ``poll`` raises what it failed with."""
        with self._changed:
            self._interrupt()

    def _interrupt(self) -> None:
        self._interrupted = True
        self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
