"""The consumer client's parts on in-memory topics and group state: fetch
errors raised by ``poll``, offset resets, the heartbeat error → action table,
the commit before a partition is handed back, and ``close``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from skyoap.consumer.client import Consumer, TopicPartition
from skyoap.consumer.fetcher import Fetcher, FetchThreadStopped
from skyoap.consumer.group import ChannelState, CommitRefused, Group, NotAMember
from skyoap.consumer.membership import HEARTBEAT_ERRORS, HeartbeatAction, HeartbeatStopped, heartbeat_action
from skyoap.consumer.subscription import PartitionState, SubscriptionState
from skyoap.model.topics import Bounds, Fetched, Retention, TopicRecord, Where
from skyoap.storage.api import OffsetOutOfRange, StorageError, StorageUnavailable
from tests.entries import Entry
from tests.unit.fakes import MemoryStateStore

T = TypeVar("T")
TOPIC = "segment"
TP0 = TopicPartition(TOPIC, 0)
FAST: dict[str, Any] = {"fetch_idle_s": 0.01, "heartbeat_interval_s": 0.01, "enable_auto_commit": False}


class MemoryTopics:
    """``TopicDAO`` in lists. ``failures`` makes the next reads of a partition
    fail with StorageUnavailable; ``broken`` makes every read raise it."""

    def __init__(self, partitions: int = 1, records: int = 0) -> None:
        self.lock = threading.Lock()
        self.records: dict[int, list[TopicRecord]] = {p: [] for p in range(partitions)}
        self.starts = dict.fromkeys(range(partitions), 0)
        self.failures: dict[int, int] = {}
        self.broken: Exception | None = None
        for p in range(partitions):
            self.append(TOPIC, p, [Entry(f"k{i}", {"i": i}, 1) for i in range(records)])

    def install(self, topics: Mapping[str, int]) -> None:
        pass

    def append(self, topic: str, partition: int, entries: Sequence[Entry]) -> Bounds:
        with self.lock:
            held = self.records[partition]
            first = len(held)
            held += [
                TopicRecord(topic, partition, first + i, e.timestamp_ms, e.key, e.value)
                for i, e in enumerate(entries)
            ]
            return Bounds(partition, self.starts[partition], len(held))

    def keep(self, topic: str, versions: Sequence[TopicRecord]) -> None:
        raise NotImplementedError("these topics are appended to")

    def advance(self, topic: str, ends: Mapping[int, int]) -> None:
        raise NotImplementedError("these topics are appended to")

    def make_readable(self, topic: str) -> None:
        pass

    def next_offset(self, topic: str, partition: int) -> int:
        with self.lock:
            return len(self.records[partition])

    def bounds(self, topic: str) -> list[Bounds]:
        with self.lock:
            return (
                [Bounds(p, self.starts[p], len(r)) for p, r in self.records.items()] if topic == TOPIC else []
            )

    def read(
        self, topic: str, partition: int, offset: int, limit: int, where: Where | None = None
    ) -> Fetched:
        with self.lock:
            if self.broken is not None:
                raise self.broken
            if self.failures.get(partition):
                self.failures[partition] -= 1
                raise StorageUnavailable(f"partition {partition} is down")
            start, end = self.starts[partition], len(self.records[partition])
            if offset < start or offset > end:
                raise OffsetOutOfRange(topic, partition, offset, start, end)
            found = self.records[partition][offset : offset + limit]
            return Fetched(found, offset + len(found))

    def trim(self, topic: str, retention: Retention, now_ms: int) -> dict[int, int]:
        return {}

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        with self.lock:
            readable = self.records[partition][self.starts[partition] :]
        return next((r.offset for r in readable if r.timestamp_ms >= timestamp_ms), None)

    def move_start(self, partition: int, start: int) -> None:
        """What retention does: the records below ``start`` are gone."""
        with self.lock:
            self.starts[partition] = start

    def close(self) -> None:
        pass


class SharedStateStore(MemoryStateStore):
    """The group document, safe to swap from several threads; ``broken`` makes
    every load raise it (storage down, or worse)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.broken: Exception | None = None
        self.failed_loads = 0

    def load(self, name: str) -> tuple[dict[str, Any] | None, object]:
        with self.lock:
            if self.broken is not None:
                self.failed_loads += 1
                raise self.broken
            return super().load(name)

    def swap(self, name: str, version: object, value: dict[str, Any]) -> bool:
        with self.lock:
            return super().swap(name, version, value)


def until(check: Callable[[], T], timeout_s: float = 10.0) -> T:
    """``check``'s first true value; fails if there is none within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            assert result, f"{check} stayed false"
            return result
        time.sleep(0.005)


def drain(consumer: Consumer, want: int) -> list[tuple[int, int]]:
    """(partition, offset) of the next ``want`` records the consumer polls."""
    seen: list[tuple[int, int]] = []

    def enough() -> bool:
        seen.extend((r.partition, r.offset) for r in consumer.poll(0.05, max_records=want - len(seen)))
        return len(seen) >= want

    until(enough)
    return seen


def poll_error(consumer: Consumer) -> Exception:
    """What ``poll`` raises once the background thread has reported it."""

    def raised() -> Exception | None:
        try:
            consumer.poll(0.05)
        except Exception as e:
            return e
        return None

    error = until(raised)
    assert error is not None
    return error


@pytest.fixture
def consumers() -> Iterator[list[Consumer]]:
    made: list[Consumer] = []
    yield made
    for c in made:
        c.close()


def thread_names(member: str) -> set[str]:
    return {t.name for t in threading.enumerate() if member in t.name}


# The fetcher.


def test_a_position_beyond_the_end_is_raised_by_every_poll_until_the_caller_seeks(
    consumers: list[Consumer],
) -> None:
    topics = MemoryTopics(records=10)
    consumer = Consumer(topics, member_id="c1", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0])
    assert drain(consumer, 10) == [(0, o) for o in range(10)]
    consumer.seek(TP0, 12)
    error = poll_error(consumer)
    assert isinstance(error, OffsetOutOfRange)
    message = (
        "offset 12 of segment/0 is not readable: the partition holds offsets 0 to 9 "
        "(it has no such offset yet)"
    )
    assert str(error) == message
    with pytest.raises(OffsetOutOfRange) as again:
        consumer.poll(0)
    assert str(again.value) == message
    consumer.seek(TP0, 7)
    assert drain(consumer, 3) == [(0, 7), (0, 8), (0, 9)]
    assert consumer.position(TP0) == 10


def test_an_offset_retention_removed_is_raised_when_auto_offset_reset_is_none(
    consumers: list[Consumer],
) -> None:
    topics, store = MemoryTopics(records=10), MemoryStateStore()
    Group(store, "g").commit(None, {"segment/0": (2, None)}, {"segment/0": 10})
    topics.move_start(0, 5)
    consumer = Consumer(topics, store, "g", member_id="c1", auto_offset_reset="none", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0])
    assert consumer.position(TP0) == 3
    error = poll_error(consumer)
    assert isinstance(error, OffsetOutOfRange)
    assert str(error) == (
        "offset 3 of segment/0 is not readable: the partition holds offsets 5 to 9 "
        "(retention removed the older ones)"
    )
    consumer.seek_to_beginning(TP0)
    assert drain(consumer, 5) == [(0, 5), (0, 6), (0, 7), (0, 8), (0, 9)]


def test_an_offset_retention_removed_moves_to_the_start_with_earliest(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(records=10), MemoryStateStore()
    Group(store, "g").commit(None, {"segment/0": (2, None)}, {"segment/0": 10})
    topics.move_start(0, 5)
    consumer = Consumer(topics, store, "g", member_id="c1", auto_offset_reset="earliest", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0])
    assert drain(consumer, 5) == [(0, 5), (0, 6), (0, 7), (0, 8), (0, 9)]


def test_an_offset_retention_removed_moves_to_the_end_with_latest(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(records=10), MemoryStateStore()
    Group(store, "g").commit(None, {"segment/0": (2, None)}, {"segment/0": 10})
    topics.move_start(0, 5)
    consumer = Consumer(topics, store, "g", member_id="c1", auto_offset_reset="latest", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0])
    until(lambda: consumer.poll(0.01) == [] and consumer.position(TP0) == 10)
    topics.append(TOPIC, 0, [Entry("k", {}, 1)] * 2)
    assert drain(consumer, 2) == [(0, 10), (0, 11)]


def test_a_storage_error_is_retried_for_its_partition_only_and_poll_never_sees_it() -> None:
    topics = MemoryTopics(partitions=2, records=3)
    topics.failures = {1: 3}
    subscription = SubscriptionState()
    fetcher = Fetcher(topics, subscription, "f1", fetch_idle_s=0.01, retry_backoff_s=0.01)
    subscription.add({TopicPartition(TOPIC, p): PartitionState(None, 0, 0) for p in (0, 1)})
    fetcher.start()
    seen: list[tuple[int, int]] = []

    def read_all() -> bool:
        fetcher.raise_error()
        seen.extend(
            (r.partition, r.offset) for r in subscription.wait_for_records(10, time.monotonic() + 0.05)
        )
        return len(seen) >= 6

    until(read_all)
    fetcher.close(10)
    assert sorted(seen) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert topics.failures == {1: 0}
    assert fetcher.done.result() is None
    assert thread_names("f1") == set()


def test_two_partitions_are_read_at_once_so_a_slow_read_holds_back_only_its_own(
    consumers: list[Consumer],
) -> None:
    class SlowPartition0(MemoryTopics):
        """The read of partition 0 takes until the test has partition 1's records."""

        released = threading.Event()

        def read(
            self, topic: str, partition: int, offset: int, limit: int, where: Where | None = None
        ) -> Fetched:
            if partition == 0:
                self.released.wait(10)
            return super().read(topic, partition, offset, limit, where)

    topics = SlowPartition0(partitions=2, records=3)
    consumer = Consumer(topics, member_id="c1", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0, TopicPartition(TOPIC, 1)])
    assert drain(consumer, 3) == [(1, 0), (1, 1), (1, 2)]
    topics.released.set()
    assert drain(consumer, 3) == [(0, 0), (0, 1), (0, 2)]


def test_a_fetch_thread_that_fails_unexpectedly_stops_and_poll_raises_why(consumers: list[Consumer]) -> None:
    topics = MemoryTopics(records=10)
    topics.broken = KeyError("boom")
    consumer = Consumer(topics, member_id="c1", **FAST)
    consumers.append(consumer)
    consumer.assign([TP0])
    error = poll_error(consumer)
    assert isinstance(error, FetchThreadStopped)
    assert str(error) == (
        "the fetch thread of consumer c1 stopped: KeyError('boom'); close this consumer and open another"
    )
    assert isinstance(error.__cause__, KeyError)
    until(lambda: thread_names("c1") == set())  # it stopped rather than spin on the error
    with pytest.raises(FetchThreadStopped):
        consumer.poll(0)


# The membership.


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (NotAMember("consumer c1 is not a member of group g"), HeartbeatAction.REJOIN),
        (StorageError("group g: its state kept changing under 100 attempts"), HeartbeatAction.RETRY),
        (StorageUnavailable("redis is down"), HeartbeatAction.RETRY),
        (OffsetOutOfRange(TOPIC, 0, 3, 5, 9), HeartbeatAction.RETRY),
        (CommitRefused("cannot commit"), HeartbeatAction.FAIL),
        (KeyError("members"), HeartbeatAction.FAIL),
    ],
)
def test_each_heartbeat_error_has_its_action(error: Exception, action: HeartbeatAction) -> None:
    assert heartbeat_action(error) is action


def test_the_heartbeat_error_table() -> None:
    # NotAMember is a CommitRefused, not a StorageError: the table's order does not hide it.
    table = HEARTBEAT_ERRORS
    assert table == ((NotAMember, HeartbeatAction.REJOIN), (StorageError, HeartbeatAction.RETRY))


def test_a_member_the_group_forgot_joins_again_and_starts_after_the_commit(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(partitions=2, records=5), SharedStateStore()
    events: list[tuple[str, list[int]]] = []
    consumer = Consumer(
        topics, store, "g", member_id="c1", **FAST,
        on_assigned=lambda tps: events.append(("assigned", [tp.partition for tp in tps])),
        on_revoked=lambda tps: events.append(("revoked", [tp.partition for tp in tps])),
    )  # fmt: skip
    consumers.append(consumer)
    consumer.subscribe([TOPIC])
    assert sorted(drain(consumer, 10)) == [(p, o) for p in (0, 1) for o in range(5)]
    consumer.commit({TP0: 3})
    group = Group(store, "g")
    group.leave("c1")  # as if it had missed its heartbeats

    seen: list[tuple[int, int]] = []

    def owned_again() -> bool:
        seen.extend((r.partition, r.offset) for r in consumer.poll(0.01))
        return len(events) == 2

    until(owned_again)
    # Its partitions came back under a new version: it reads them again from after the commit.
    assert events == [("assigned", [0, 1]), ("assigned", [0, 1])]
    assert sorted(group.state().members) == ["c1"]
    assert {n: (c.state.value, c.owner, c.version) for n, c in group.state().channels.items()} == {
        "segment/0": ("OPEN", "c1", 2),
        "segment/1": ("OPEN", "c1", 2),
    }
    seen += drain(consumer, 6 - len(seen))
    assert sorted(seen) == [(0, 4)] + [(1, o) for o in range(5)]


def test_a_storage_error_in_heartbeats_is_retried_and_not_raised(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(records=1), SharedStateStore()
    consumer = Consumer(topics, store, "g", member_id="c1", **FAST)
    consumers.append(consumer)
    consumer.subscribe([TOPIC])
    assert drain(consumer, 1) == [(0, 0)]
    store.broken = StorageUnavailable("redis is down")
    until(lambda: store.failed_loads >= 3)
    assert consumer.poll(0) == []
    store.broken = None
    beat = Group(store, "g").state().members["c1"].heartbeat_ms
    until(lambda: Group(store, "g").state().members["c1"].heartbeat_ms > beat)
    assert consumer.assignment() == {TP0}


def test_a_heartbeat_that_fails_unexpectedly_stops_and_poll_raises_why(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(records=1), SharedStateStore()
    consumer = Consumer(topics, store, "g", member_id="c1", **FAST)
    consumers.append(consumer)
    consumer.subscribe([TOPIC])
    assert drain(consumer, 1) == [(0, 0)]
    store.broken = RuntimeError("disk on fire")
    error = poll_error(consumer)
    assert isinstance(error, HeartbeatStopped)
    assert str(error) == (
        "the heartbeat thread of consumer c1 stopped: RuntimeError('disk on fire'); the group drops the "
        "member after its session timeout; close this consumer and open another"
    )
    assert isinstance(error.__cause__, RuntimeError)
    until(lambda: thread_names("consumer-heartbeat-c1") == set())
    store.broken = None


def test_a_revoked_partition_is_committed_before_it_is_handed_back(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(partitions=4, records=5), SharedStateStore()
    events: list[tuple[str, list[int], dict[str, int]]] = []
    group = Group(store, "g")

    def record(what: str) -> Callable[[list[TopicPartition]], None]:
        # What the group had committed when the callback ran.
        return lambda tps: events.append((what, [tp.partition for tp in tps], dict(group.state().committed)))

    consumer = Consumer(
        topics, store, "g", member_id="a", fetch_idle_s=0.01, heartbeat_interval_s=0.01,
        auto_commit_interval_s=3600, on_assigned=record("assigned"), on_revoked=record("revoked"),
    )  # fmt: skip
    consumers.append(consumer)
    consumer.subscribe([TOPIC])
    assert len(drain(consumer, 20)) == 20
    group.join("b", {TOPIC: 4})

    def handed_back() -> bool:
        consumer.poll(0.01)
        return {n for n, g in group.heartbeat("b").items() if g.state is ChannelState.OPEN} == {
            "segment/2",
            "segment/3",
        }

    until(handed_back)
    assert events == [
        ("assigned", [0, 1, 2, 3], {}),
        ("revoked", [2, 3], {}),
    ]
    assert group.state().committed == {"segment/2": 4, "segment/3": 4}
    assert consumer.assignment() == {TP0, TopicPartition(TOPIC, 1)}
    group.leave("b")


# The consumer as a whole.


def test_close_commits_leaves_and_joins_every_thread_it_started(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(partitions=2, records=3), SharedStateStore()
    consumer = Consumer(topics, store, "g", member_id="c1", fetch_idle_s=0.01, heartbeat_interval_s=0.01)
    consumers.append(consumer)
    consumer.subscribe([TOPIC])
    assert len(drain(consumer, 6)) == 6
    assert consumer.commit({TP0: 1}, asynchronous=True).result() is None
    assert thread_names("c1") == {
        "consumer-fetch-c1",
        "consumer-fetch-c1-1",
        "consumer-heartbeat-c1",
        "consumer-commit-c1_0",
    }
    consumer.close()
    assert thread_names("c1") == set()
    group = Group(store, "g").state()
    assert group.committed == {"segment/0": 2, "segment/1": 2}  # the last auto-commit, before leaving
    assert group.members == {}
    consumer.close()
    with pytest.raises(ValueError, match="this consumer is closed; open another to read on"):
        consumer.poll(0)


def test_a_consumer_that_never_chose_partitions_closes_without_threads() -> None:
    topics, store = MemoryTopics(), SharedStateStore()
    consumer = Consumer(topics, store, "g", member_id="c1")
    assert thread_names("c1") == set()  # nothing starts before subscribe or assign
    consumer.close()
    assert store.docs == {}  # it never joined, so it did not leave either


def test_a_failed_subscribe_chooses_nothing_and_the_caller_may_try_again(consumers: list[Consumer]) -> None:
    topics, store = MemoryTopics(records=1), SharedStateStore()
    consumer = Consumer(topics, store, "g", member_id="c1", **FAST)
    consumers.append(consumer)
    with pytest.raises(ValueError, match="there is no topic 'segmnet'"):
        consumer.subscribe(["segmnet"])
    assert thread_names("c1") == set()
    consumer.subscribe([TOPIC])
    assert drain(consumer, 1) == [(0, 0)]
    with pytest.raises(ValueError, match="this consumer already subscribed or was assigned partitions"):
        consumer.assign([TP0])
