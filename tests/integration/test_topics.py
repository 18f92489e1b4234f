"""Topics in storage: offsets, the high watermark, retention, and what L2
publishes into them. Runs on both storages."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest
from elasticsearch import Elasticsearch

from agent.traces import chain_trace, report
from model.topics import Bounds, Entry, Retention, Topic
from storage.api import OffsetOutOfRange
from storage.select import OpenStorage
from tests.integration.helpers import eventually
from wiring.config import NodeConfig
from wiring.node import Node


def entries(n: int, prefix: str = "k", timestamp_ms: int = 1_000) -> list[Entry]:
    return [Entry(f"{prefix}{i}", {"n": i, "who": prefix}, timestamp_ms) for i in range(n)]


def test_appends_get_growing_offsets_and_reads_stop_at_the_end(storage: OpenStorage) -> None:
    topics = storage.topics
    topics.install({"metrics": 4})
    topics.install({"metrics": 8})  # a topic keeps the partitions it was created with
    assert topics.bounds("metrics") == [Bounds(p, 0, 0) for p in range(4)]
    assert topics.bounds("never") == []

    assert topics.append("metrics", 1, entries(3)) == Bounds(1, 0, 3)
    assert topics.append("metrics", 1, entries(2, "x")) == Bounds(1, 0, 5)
    got = topics.read("metrics", 1, 0, 100).records
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, "k0", {"n": 0, "who": "k"}),
        (1, "k1", {"n": 1, "who": "k"}),
        (2, "k2", {"n": 2, "who": "k"}),
        (3, "x0", {"n": 0, "who": "x"}),
        (4, "x1", {"n": 1, "who": "x"}),
    ]
    assert {(r.topic, r.partition, r.timestamp_ms) for r in got} == {("metrics", 1, 1_000)}
    assert [r.offset for r in topics.read("metrics", 1, 3, 1).records] == [3]
    assert topics.read("metrics", 1, 5, 100).records == []
    assert topics.read("metrics", 0, 0, 100).records == []
    with pytest.raises(
        OffsetOutOfRange, match=r"offset 6 of metrics/1 is not readable: .* no such offset yet"
    ):
        topics.read("metrics", 1, 6, 100)


def test_concurrent_writers_never_share_an_offset_and_keep_their_order(storage: OpenStorage) -> None:
    topics = storage.topics
    topics.install({"inventory": 2})

    def write(name: str) -> None:
        for batch in range(10):
            topics.append("inventory", 0, [Entry(name, {"seq": batch * 5 + i}, 1) for i in range(5)])

    writers = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert topics.bounds("inventory")[0] == Bounds(0, 0, 200)
    got = topics.read("inventory", 0, 0, 1000).records
    assert [r.offset for r in got] == list(range(200))
    for name in ("w0", "w1", "w2", "w3"):
        assert [r.value["seq"] for r in got if r.key == name] == list(range(50))


def test_retention_by_size_and_by_age_moves_the_start(storage: OpenStorage) -> None:
    topics = storage.topics
    topics.install({"metrics": 2})
    now_ms = int(time.time() * 1000)
    topics.append("metrics", 0, entries(4, "old", now_ms - 7_200_000))
    topics.append("metrics", 0, entries(6, "new", now_ms))
    topics.append("metrics", 1, entries(3, "new", now_ms))

    # Age: an hour keeps the 6 new ones of partition 0.
    assert topics.trim("metrics", Retention(3600, 1000), now_ms) == {0: 4}
    assert topics.bounds("metrics") == [Bounds(0, 4, 10), Bounds(1, 0, 3)]
    # Size: at most 2 per partition.
    assert topics.trim("metrics", Retention(3600, 2), now_ms) == {0: 4, 1: 1}
    assert topics.bounds("metrics") == [Bounds(0, 8, 10), Bounds(1, 1, 3)]
    assert [r.key for r in topics.read("metrics", 0, 8, 10).records] == ["new4", "new5"]
    with pytest.raises(
        OffsetOutOfRange, match=r"offset 3 of metrics/0 .* offsets 8 to 9 \(retention removed"
    ):
        topics.read("metrics", 0, 3, 10)
    # Appends go on after the end, whatever retention removed.
    assert topics.append("metrics", 0, entries(1)) == Bounds(0, 8, 11)
    assert topics.trim("metrics", Retention(3600, 2), now_ms) == {0: 1}


@pytest.mark.parametrize("node_config", ["elasticsearch"], indirect=True)
def test_records_a_dead_writer_left_above_the_end_are_kept_or_removed(
    storage: OpenStorage, node_config: NodeConfig
) -> None:
    """A writer that died after writing records but before moving the end:
    the next append keeps those contiguous with the end (they are durable) and
    deletes those past a gap (no reader can have seen them)."""
    topics = storage.topics
    topics.install({"metrics": 1})
    topics.append("metrics", 0, entries(2))
    index = f"{node_config.storage.es_index_prefix}_topic_metrics"
    with Elasticsearch(node_config.storage.es_hosts) as es:
        for offset in (2, 3, 5):
            es.create(
                index=index,
                id=f"0-{offset}",
                document={"partition": 0, "offset": offset, "timestamp_ms": 1, "key": "dead", "value": {}},
                refresh=True,
            )
    assert topics.append("metrics", 0, entries(1, "live")) == Bounds(0, 0, 5)
    assert [(r.offset, r.key) for r in topics.read("metrics", 0, 0, 100).records] == [
        (0, "k0"), (1, "k1"), (2, "dead"), (3, "dead"), (4, "live0"),
    ]  # fmt: skip


@pytest.mark.parametrize("node_config", ["elasticsearch"], indirect=True)
def test_a_topic_whose_install_was_cut_short_is_completed_to_its_first_count(
    storage: OpenStorage, node_config: NodeConfig
) -> None:
    """An install that failed after creating some partitions (a busy server)
    is run again: the topic gets the partitions it lacks, as many as first
    asked for, not those of the new configuration."""
    storage.topics.install({"inventory": 4})
    with Elasticsearch(node_config.storage.es_hosts) as es:
        for p in (0, 1, 2):  # the last partition is created first
            index = f"{node_config.storage.es_index_prefix}_topic_partitions"
            es.delete(index=index, id=f"inventory-{p}", refresh=True)
    storage.topics.install({"inventory": 8})
    assert [b.partition for b in storage.topics.bounds("inventory")] == [0, 1, 2, 3]


def test_what_l2_stores_is_published_to_the_topics(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], storage: OpenStorage
) -> None:
    node = start_node(node_config)
    start_ms = int(time.time() * 1000)
    rng = random.Random(5)
    instances = {"web": ["web-1"], "db": ["db-1"]}
    endpoints = {"web": ["GET:/"], "db": ["SELECT"]}
    segments = [
        s
        for t in range(20)
        for s in chain_trace(f"trace{t}", ["web", "db"], start_ms, rng, instances, endpoints)
    ]
    report(node.address, segments)

    def published(topic: Topic) -> list[dict[str, object]]:
        return [
            r.value
            for b in storage.topics.bounds(topic.value)
            for r in storage.topics.read(topic.value, b.partition, b.start, 10_000).records
        ]

    # Every segment once.
    eventually(lambda: len(published(Topic.SEGMENT)) == 40)
    assert sorted(str(v["key"]) for v in published(Topic.SEGMENT)) == sorted(
        s.traceSegmentId for s in segments
    )

    # The service rows as stored: their calls add up to the segments' entry spans.
    def service_calls() -> dict[str, int]:
        latest: dict[str, int] = {}
        for v in published(Topic.METRICS):
            if v["model"] == "service_metrics" and v["level"] == "minute":
                latest[str(v["service"])] = int(str(v["calls"]))
        return latest

    eventually(lambda: service_calls() == {"web": 20, "db": 20})
    services = {
        (v["name"], v["sequence"] > 0)  # type: ignore[operator]
        for v in published(Topic.INVENTORY)
        if v["model"] == "service_inventory"
    }
    assert services == {("web", True), ("db", True)}
