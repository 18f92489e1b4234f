"""The consumer client: reads topics by offset, alone (``assign``) or as a
member of a consumer group (``subscribe``), and commits its progress.

Offsets follow the TDengine seed: a commit records the last offset processed,
and whoever takes the partition next starts after it (commit 3, resume at 4).
``position`` is the offset the next ``poll`` returns. Where a group has no
committed offset, ``auto_offset_reset`` decides: ``earliest`` starts at the
oldest record retention kept, ``latest`` at the partition's end.

``poll`` is pipelined (the Kafka seed): a fetch thread reads ahead into a
buffer per partition while the caller processes the previous batch, and
waits for new records when it has caught up. A heartbeat thread keeps the
member alive; assignment changes it learns of are applied inside ``poll``,
where the revoked callback runs (and auto-commit commits) before the
partition is handed back.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from consumer.group import (
    HEARTBEAT_INTERVAL_S,
    SESSION_TIMEOUT_S,
    ChannelState,
    CommitRefused,
    Grant,
    Group,
    NotAMember,
    channel_name,
)
from model.topics import Bounds, Topic, TopicRecord
from storage.api import OffsetOutOfRange, StateStore, StorageError, TopicDAO
from storage.config import StorageConfig

log = logging.getLogger(__name__)

RESETS = ("earliest", "latest", "none")


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return channel_name(self.topic, self.partition)


@dataclass(eq=False)
class _Owned:
    """A partition this consumer reads: where the caller is (``position``), where
    the fetch thread is (``fetch_at``), and what it fetched ahead."""

    version: int | None
    position: int
    fetch_at: int
    buffer: collections.deque[TopicRecord] = field(default_factory=collections.deque)
    committed: int | None = None


Callback = Callable[[list[TopicPartition]], None]


class Consumer:
    def __init__(
        self,
        streams: TopicDAO,
        state: StateStore | None = None,
        group: str | None = None,
        *,
        auto_offset_reset: str = "earliest",
        enable_auto_commit: bool = True,
        auto_commit_interval_s: float = 5.0,
        session_timeout_s: float = SESSION_TIMEOUT_S,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        fetch_size: int = 1000,
        fetch_idle_s: float = 0.05,
        member_id: str | None = None,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
    ) -> None:
        if auto_offset_reset not in RESETS:
            raise ValueError(
                f"auto_offset_reset must be one of {', '.join(RESETS)}, not {auto_offset_reset!r}"
            )
        if group is not None and state is None:
            raise ValueError("a consumer in a group needs the shared state store")
        self._streams = streams
        self._state = state
        self._group = Group(state, group, session_timeout_s) if group and state else None
        self.member_id = member_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.fetch_size = fetch_size
        self.fetch_idle_s = fetch_idle_s
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._lock = threading.Condition()
        self._owned: dict[TopicPartition, _Owned] = {}
        self._topics: dict[str, int] = {}
        self._subscribed = False
        self._grants: dict[str, Grant] = {}
        self._released: set[str] = set()
        self._closed = threading.Event()
        self._next_auto_commit = time.monotonic() + auto_commit_interval_s
        self._committer: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._owns_storage = False
        self.error: Exception | None = None

    @classmethod
    def open(cls, config: StorageConfig, group: str | None = None, **options: object) -> Consumer:
        """A consumer of the storage ``config`` names (it closes it on close)."""
        from storage.select import open_topics

        streams, state = open_topics(config)
        consumer = cls(streams, state, group, **options)  # type: ignore[arg-type]
        consumer._owns_storage = True
        return consumer

    # Choosing partitions.

    def subscribe(self, topics: Iterable[str]) -> None:
        """Joins the group: its members share the topics' partitions evenly."""
        if self._group is None:
            raise ValueError("subscribe needs a group; a consumer without one uses assign")
        if self._owned or self._subscribed:
            raise ValueError("this consumer already subscribed or was assigned partitions")
        self._topics = {t: self._partition_count(t) for t in topics}
        self._subscribed = True
        self._grants = self._group.join(self.member_id, self._topics, socket.gethostname())
        self._start(self._heartbeats, "heartbeat")
        self._start(self._fetches, "fetch")

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Reads exactly these partitions, with no group coordination (a group,
        if given, still keeps its committed offsets)."""
        if self._subscribed or self._owned:
            raise ValueError("this consumer already subscribed or was assigned partitions")
        chosen = sorted(set(partitions))
        for tp in chosen:
            if tp.partition >= self._partition_count(tp.topic) or tp.partition < 0:
                raise ValueError(f"topic {tp.topic} has no partition {tp.partition}")
        with self._lock:
            for tp in chosen:
                self._owned[tp] = self._start_at(tp, None)
        self._start(self._fetches, "fetch")

    def _partition_count(self, topic: str) -> int:
        Topic.named(topic)
        count = len(self._streams.bounds(topic))
        if not count:
            raise ValueError(f"topic {topic} has no partitions yet: no node has installed it")
        return count

    def _start_at(self, tp: TopicPartition, version: int | None) -> _Owned:
        committed = self._group.committed(str(tp)) if self._group else None
        if committed is not None:
            position = committed + 1
        elif self.auto_offset_reset == "none":
            raise ValueError(f"group has no committed offset for {tp} and auto_offset_reset is 'none'")
        else:
            position = self._reset_position(tp)
        return _Owned(version, position, position, committed=committed)

    def _bounds(self, tp: TopicPartition) -> Bounds:
        return self._streams.bounds(tp.topic)[tp.partition]

    def _reset_position(self, tp: TopicPartition) -> int:
        b = self._bounds(tp)
        return b.start if self.auto_offset_reset == "earliest" else b.end

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._owned)

    # Reading.

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[TopicRecord]:
        """Up to ``max_records`` records, in offset order within each partition;
        waits up to ``timeout_s`` for the first one."""
        if self.error is not None:
            raise self.error
        self._apply_grants()
        self._auto_commit()
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                batch = self._take(max_records)
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0 or self._closed.is_set():
                    return batch
                self._lock.wait(min(remaining, 0.1))
                if self._grants_changed():
                    return []  # the caller polls again and the change is applied first

    def _take(self, max_records: int) -> list[TopicRecord]:
        out: list[TopicRecord] = []
        for owned in self._owned.values():
            while owned.buffer and len(out) < max_records:
                record = owned.buffer.popleft()
                if record.offset != owned.position:  # fetched before a seek
                    continue
                out.append(record)
                owned.position = record.offset + 1
        return out

    def _fetches(self) -> None:
        """The fetch thread: keeps each partition's buffer a fetch ahead."""
        while not self._closed.is_set():
            with self._lock:
                work = [
                    (tp, o, o.fetch_at) for tp, o in self._owned.items() if len(o.buffer) < self.fetch_size
                ]
            fetched = 0
            for tp, owned, offset in work:
                try:
                    records = self._streams.read(tp.topic, tp.partition, offset, self.fetch_size)
                except OffsetOutOfRange as e:
                    self._out_of_range(tp, owned, e)
                    continue
                except StorageError as e:
                    log.warning("fetching %s failed (retrying): %s", tp, e)
                    self._closed.wait(1.0)
                    continue
                with self._lock:
                    if self._owned.get(tp) is not owned or owned.fetch_at != offset:
                        continue  # revoked or sought meanwhile
                    owned.buffer.extend(records)
                    if records:
                        owned.fetch_at = records[-1].offset + 1
                        fetched += len(records)
                        self._lock.notify_all()
            if not fetched:
                self._closed.wait(self.fetch_idle_s)

    def _out_of_range(self, tp: TopicPartition, owned: _Owned, e: OffsetOutOfRange) -> None:
        if self.auto_offset_reset == "none" or e.offset > e.end:
            self.error = e
            self._closed.wait(1.0)
            return
        to = e.start if self.auto_offset_reset == "earliest" else e.end
        log.warning("%s; %s reset to %d (%s)", e, tp, to, self.auto_offset_reset)
        with self._lock:
            if self._owned.get(tp) is owned:
                owned.position = owned.fetch_at = to
                owned.buffer.clear()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            owned = self._owned.get(tp)
            if owned is None:
                raise ValueError(f"{tp} is not assigned to this consumer")
            owned.position = owned.fetch_at = offset
            owned.buffer.clear()

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.seek(tp, self._bounds(tp).start)

    def seek_to_end(self, tp: TopicPartition) -> None:
        self.seek(tp, self._bounds(tp).end)

    def position(self, tp: TopicPartition) -> int:
        with self._lock:
            owned = self._owned.get(tp)
            if owned is None:
                raise ValueError(f"{tp} is not assigned to this consumer")
            return owned.position

    def committed(self, tp: TopicPartition) -> int | None:
        """The group's last processed offset of ``tp`` (None: never committed)."""
        if self._group is None:
            raise ValueError("a consumer without a group has no committed offsets")
        return self._group.committed(str(tp))

    # Committing.

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> Future[None]:
        """Commits ``offsets`` (the last offset processed per partition; by
        default everything ``poll`` returned). Synchronous unless
        ``asynchronous``; the future holds the outcome (CommitRefused says why
        the group refused)."""
        if self._group is None:
            raise ValueError("a consumer without a group cannot commit")
        with self._lock:
            if offsets is None:
                offsets = {
                    tp: o.position - 1 for tp, o in self._owned.items() if o.position - 1 != o.committed
                }
            unowned = [tp for tp in offsets if tp not in self._owned]
            if unowned:
                raise CommitRefused(
                    f"cannot commit {', '.join(map(str, unowned))}: not assigned to this consumer"
                )
            work = {tp: (offset, self._owned[tp].version) for tp, offset in offsets.items()}
        if not asynchronous:
            self._commit(work)
            done: Future[None] = Future()
            done.set_result(None)
            return done
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="commit")
        return self._committer.submit(self._commit, work)

    def _commit(self, work: Mapping[TopicPartition, tuple[int, int | None]]) -> None:
        if not work:
            return
        assert self._group is not None
        # The group checks offsets against the ends: one read of bounds per topic.
        ends = {
            channel_name(topic, b.partition): b.end
            for topic in {tp.topic for tp in work}
            for b in self._streams.bounds(topic)
        }
        member = self.member_id if self._subscribed else None
        self._group.commit(member, {str(tp): v for tp, v in work.items()}, ends)
        with self._lock:
            for tp, (offset, _) in work.items():
                if tp in self._owned:
                    self._owned[tp].committed = offset

    def _auto_commit(self, force: bool = False) -> None:
        if not (self.enable_auto_commit and self._group) or (
            not force and time.monotonic() < self._next_auto_commit
        ):
            return
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        try:
            self.commit()
        except CommitRefused as e:
            log.warning("auto-commit refused: %s", e)

    # Group membership.

    def _heartbeats(self) -> None:
        while not self._closed.wait(self.heartbeat_interval_s):
            try:
                self._beat()
            except StorageError as e:
                log.warning("heartbeat of %s failed: %s", self.member_id, e)

    def _beat(self) -> None:
        assert self._group is not None
        with self._lock:
            released = frozenset(self._released)
        try:
            grants = self._group.heartbeat(self.member_id, released)
        except NotAMember as e:
            log.warning("%s; joining again", e)
            grants = self._group.join(self.member_id, self._topics, socket.gethostname())
        with self._lock:
            self._released -= released
            self._grants = grants
            self._lock.notify_all()

    def _grants_changed(self) -> bool:
        """Whether the grants ask for anything ``poll`` has not applied (lock held)."""
        if not self._subscribed:
            return False
        opened = {n for n, g in self._grants.items() if g.state is ChannelState.OPEN}
        return opened != {str(tp) for tp in self._owned}

    def _apply_grants(self) -> None:
        """Hands back what the group revoked (after the revoked callback and a
        commit), drops what it lost, and starts on what it was given."""
        if not self._subscribed:
            return
        with self._lock:
            grants = dict(self._grants)
            revoked = [
                tp
                for tp in self._owned
                if str(tp) not in grants or grants[str(tp)].state is not ChannelState.OPEN
            ]
            closing = [tp for tp in revoked if str(tp) in grants]  # still ours to commit
            given = [
                g for n, g in grants.items()
                if g.state is ChannelState.OPEN
                and (TopicPartition(g.topic, g.partition) not in self._owned
                     or self._owned[TopicPartition(g.topic, g.partition)].version != g.version)
            ]  # fmt: skip
        if revoked:
            if self._on_revoked is not None:
                self._on_revoked(sorted(revoked))
            if closing and self.enable_auto_commit:
                try:
                    self.commit({tp: self.position(tp) - 1 for tp in closing if self.position(tp) > 0})
                except CommitRefused as e:
                    log.warning("commit before handing back %s refused: %s", closing, e)
            with self._lock:
                for tp in revoked:
                    self._owned.pop(tp, None)
                self._released |= {str(tp) for tp in closing}
            self._beat()  # hand them back now, not at the next heartbeat
        if given:
            started = {
                TopicPartition(g.topic, g.partition): self._start_at(
                    TopicPartition(g.topic, g.partition), g.version
                )
                for g in given
            }
            with self._lock:
                self._owned.update(started)
            if self._on_assigned is not None:
                self._on_assigned(sorted(started))

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=f"consumer-{name}-{self.member_id}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Commits what was processed (with auto-commit), leaves the group and
        stops. Idempotent."""
        if self._closed.is_set():
            return
        try:
            if self._owned:
                self._auto_commit(force=True)
        finally:
            self._closed.set()
            for t in self._threads:
                t.join(timeout=10)
            if self._committer is not None:
                self._committer.shutdown(wait=True)
            if self._group is not None and self._subscribed:
                self._group.leave(self.member_id)
            if self._owns_storage:
                self._streams.close()
                if self._state is not None:
                    self._state.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
