"""The consumer client: reads topics by offset, alone (``assign``) or as a
member of a consumer group (``subscribe``), and commits its progress.

Offsets follow the TDengine seed: a commit records the last offset processed,
and whoever takes the partition next starts after it (commit 3, resume at 4).
``position`` is the offset the next ``poll`` returns. Where a group has no
committed offset, ``auto_offset_reset`` decides: ``earliest`` starts at the
oldest record retention kept, ``latest`` at the partition's end.

``Consumer`` is the face users call; the work is done by three parts, split
the way aiokafka splits its consumer:

- ``SubscriptionState`` (``consumer/subscription.py``): what is owned, the
  positions, versions and read-ahead buffers, the group's grants; one lock.
- ``Fetcher`` (``consumer/fetcher.py``): the fetch threads, which read ahead
  into a buffer per partition, two partitions at once, while the caller
  processes the previous batch (the Kafka seed's pipelined ``poll``), and
  out-of-range resets.
- ``Membership`` (``consumer/membership.py``): the heartbeat thread, the
  grants, the callbacks, and commits (auto, asynchronous, before hand-back).

Assignment changes a heartbeat learns of are applied inside ``poll``, where
the revoked callback runs (and auto-commit commits) before the partition is
handed back. An error a background thread cannot recover from is raised by
the next ``poll``.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future

from skyoap.consumer.fetcher import RESETS, Fetcher
from skyoap.consumer.group import HEARTBEAT_INTERVAL_S, SESSION_TIMEOUT_S, Group
from skyoap.consumer.lag import LagCollector, lags
from skyoap.consumer.membership import Callback, Membership
from skyoap.consumer.subscription import PartitionState, SubscriptionState, TopicPartition
from skyoap.edge.admin import AdminServer
from skyoap.model.topics import Topic, TopicRecord
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import StateStore, TopicDAO
from skyoap.storage.config import StorageConfig

__all__ = ["RESETS", "Callback", "Consumer", "TopicPartition"]

CLOSE_TIMEOUT_S = 10.0
"""How long ``close`` waits for the background threads to stop, unless told otherwise."""


def _member_id(member_id: str | None, group_instance_id: str | None) -> str:
    """The member's id: its static ``group_instance_id``, else ``member_id``,
    else one made of the host, the process and a random part."""
    if group_instance_id is not None and (not group_instance_id or member_id is not None):
        raise ValueError("group_instance_id names the member: give a non-empty one, and no member_id")
    return group_instance_id or member_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _lag_server(
    topics: TopicDAO, state: StateStore | None, group: str | None, host: str, port: int
) -> AdminServer:
    """A started admin server whose /metrics serves ``group``'s lag and committed offsets."""
    if group is None or state is None:
        raise ValueError("an admin port serves a group's lag: open the consumer with a group")
    instruments = Instruments()
    instruments.registry.register(LagCollector(lambda: lags(topics, state, [group])))
    admin = AdminServer(host, port, instruments)
    admin.start()
    return admin


class Consumer:
    admin: AdminServer | None
    """With ``admin_port``: its /metrics serves the group's lag and committed offsets (0: a free port)."""
    _chosen = False
    _closed = False
    _owns_storage = False

    def __init__(
        self,
        topics: TopicDAO,
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
        group_instance_id: str | None = None,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        admin_port: int | None = None,
        admin_host: str = "127.0.0.1",
    ) -> None:
        self.member_id = _member_id(member_id, group_instance_id)
        self._subscription = SubscriptionState()
        self._fetcher = Fetcher(
            topics,
            self._subscription,
            self.member_id,
            auto_offset_reset=auto_offset_reset,
            fetch_size=fetch_size,
            fetch_idle_s=fetch_idle_s,
        )
        if group is not None and state is None:
            raise ValueError("a consumer in a group needs the shared state store")
        self._topics_dao = topics
        self._state = state
        self._membership = (
            Membership(
                Group(state, group, session_timeout_s),
                topics,
                self._subscription,
                self.member_id,
                first_position=self._fetcher.first_position,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_s=auto_commit_interval_s,
                heartbeat_interval_s=heartbeat_interval_s,
                on_assigned=on_assigned,
                on_revoked=on_revoked,
                static=group_instance_id is not None,
            )
            if group and state
            else None
        )
        # The options it was opened with, for reading: the parts took their copies.
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.fetch_size = fetch_size
        self.fetch_idle_s = fetch_idle_s
        self.admin = None if admin_port is None else _lag_server(topics, state, group, admin_host, admin_port)

    @classmethod
    def open(cls, config: StorageConfig, group: str | None = None, **options: object) -> Consumer:
        """A consumer of the storage ``config`` names (it closes it on close)."""
        from skyoap.storage.select import open_topics

        topics, state = open_topics(config)
        try:
            consumer = cls(topics, state, group, **options)  # type: ignore[arg-type]
        except BaseException:  # a bad option, or an admin port taken
            topics.close()
            state.close()
            raise
        consumer._owns_storage = True
        return consumer

    # Choosing partitions.

    def subscribe(self, topics: Iterable[str]) -> None:
        """Joins the group: its members share the topics' partitions evenly."""
        if self._membership is None:
            raise ValueError("subscribe needs a group; a consumer without one uses assign")
        self._not_chosen_yet()
        self._membership.join({t: self._partition_count(t) for t in topics})
        self._chosen = True
        self._membership.start()
        self._fetcher.start()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Reads exactly these partitions, with no group coordination (a group,
        if given, still keeps its committed offsets)."""
        self._not_chosen_yet()
        chosen = sorted(set(partitions))
        for tp in chosen:
            if tp.partition >= self._partition_count(tp.topic) or tp.partition < 0:
                raise ValueError(f"topic {tp.topic} has no partition {tp.partition}")
        self._subscription.add({tp: self._start_state(tp) for tp in chosen})
        self._chosen = True
        self._fetcher.start()

    def _not_chosen_yet(self) -> None:
        # A failed subscribe or assign chose nothing: the caller may try again.
        if self._chosen:
            raise ValueError("this consumer already subscribed or was assigned partitions")

    def _partition_count(self, topic: str) -> int:
        Topic.named(topic)
        count = len(self._topics_dao.bounds(topic))
        if not count:
            raise ValueError(f"topic {topic} has no partitions yet: no node has installed it")
        return count

    def _start_state(self, tp: TopicPartition) -> PartitionState:
        if self._membership is not None:
            return self._membership.start_state(tp, None)
        position = self._fetcher.first_position(tp, None)
        return PartitionState(None, position, position)

    def assignment(self) -> set[TopicPartition]:
        return self._subscription.assigned()

    # Reading.

    def poll(self, timeout_s: float = 1.0, max_records: int = 500) -> list[TopicRecord]:
        """Up to ``max_records`` records, in offset order within each partition;
        waits up to ``timeout_s`` for the first one. Raises what the fetcher or
        the heartbeats failed with and the caller must act on (an offset out of
        range that ``auto_offset_reset`` does not cover, for one)."""
        if self._closed:
            raise ValueError("this consumer is closed; open another to read on")
        self._fetcher.raise_error()
        if self._membership is not None:
            self._membership.raise_error()
            self._membership.apply_grants()
            self._membership.maybe_auto_commit()
        return self._subscription.wait_for_records(max_records, time.monotonic() + timeout_s)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._subscription.seek(tp, offset)

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.seek(tp, self._fetcher.bounds(tp).start)

    def seek_to_end(self, tp: TopicPartition) -> None:
        self.seek(tp, self._fetcher.bounds(tp).end)

    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """For each partition, the first offset whose record was published at
        or after the time given (ms since the epoch), or None when none was
        that recent: ``seek`` there to replay from a time."""
        return {tp: self._topics_dao.offset_for_time(tp.topic, tp.partition, ms) for tp, ms in times.items()}

    def position(self, tp: TopicPartition) -> int:
        return self._subscription.position(tp)

    def committed(self, tp: TopicPartition) -> int | None:
        """The group's last processed offset of ``tp`` (None: never committed)."""
        if self._membership is None:
            raise ValueError("a consumer without a group has no committed offsets")
        return self._membership.committed(tp)

    # Committing.

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> Future[None]:
        """Commits ``offsets`` (the last offset processed per partition; by
        default everything ``poll`` returned). Synchronous unless
        ``asynchronous``; the future holds the outcome (CommitRefused says why
        the group refused)."""
        if self._membership is None:
            raise ValueError("a consumer without a group cannot commit")
        return self._membership.commit(offsets, asynchronous)

    # Stopping.

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Commits what was processed (with auto-commit), leaves the group and
        stops; every thread it started has stopped when it returns (one stuck
        in storage past ``timeout_s`` is logged and left). Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        try:
            self._fetcher.close(timeout_s)
            if self._membership is not None:
                # Even if the fetcher used up the budget, the last commit and the leave are worth a moment.
                self._membership.close(max(1.0, deadline - time.monotonic()))
        finally:
            self._subscription.close()
            if self.admin is not None:
                self.admin.close()
            if self._owns_storage:
                self._topics_dao.close()
                if self._state is not None:
                    self._state.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
