"""Topics in storage: offsets, the high watermark, the versions of rows,
retention, and what L2 publishes into them. Runs on both storages."""

from __future__ import annotations

import dataclasses
import itertools
import random
import threading
import time
from collections.abc import Callable

import pytest
from elasticsearch import Elasticsearch

from skyoap.agent.traces import chain_trace, report
from skyoap.aggregator.topics import Topics
from skyoap.model.inventory import INVENTORY_TYPES, ServiceInventory
from skyoap.model.metrics import METRICS_TYPES, Downsampling, EndpointMetrics, M, ServiceRelationMetrics
from skyoap.model.topics import Bounds, Retention, Table, Topic, Where, partition_of
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import MetricsWrite, OffsetOutOfRange
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.entries import Entry, publish
from tests.integration.helpers import eventually

MINUTE = Downsampling.MINUTE


def entries(n: int, prefix: str = "k", timestamp_ms: int = 1_000) -> list[Entry]:
    return [Entry(f"{prefix}{i}", {"n": i, "who": prefix}, timestamp_ms) for i in range(n)]


def test_entries_get_growing_offsets_and_reads_stop_at_the_end(storage: OpenStorage) -> None:
    topics = storage.topics
    topics.install({"metrics": 4})
    topics.install({"metrics": 8})  # a topic keeps the partitions it was created with
    assert topics.bounds("metrics") == [Bounds(p, 0, 0) for p in range(4)]
    assert topics.bounds("never") == []

    assert publish(topics, "metrics", 1, entries(3)) == Bounds(1, 0, 3)
    assert publish(topics, "metrics", 1, entries(2, "x")) == Bounds(1, 0, 5)
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


def test_every_version_of_a_row_is_on_its_topic_in_order(storage: OpenStorage) -> None:
    """A row written five times: each version is on the inventory topic, in
    order, at its own offset (the current one in the row itself, the others
    kept in the history before they were overwritten). A version both kept
    and still in its row (its writer died between the two) is read once."""
    storage.inventory.install(INVENTORY_TYPES)
    storage.topics.install({"inventory": 2})
    topics = Topics(storage.topics, storage.records, storage.offsets, {Topic.INVENTORY: 2}, Instruments(), 60)
    table = Table(ServiceInventory)
    web = ServiceInventory(name="web", sequence=1, heartbeat_time=1)
    with topics.writing(table, [(None, web)]) as placed:
        placed.refused = storage.inventory.insert(ServiceInventory, [web], placed.positions).key_taken
    for beat in range(2, 6):
        row = storage.inventory.get_many(ServiceInventory, ["web"])["web"]
        new = dataclasses.replace(row.item, heartbeat_time=beat)
        with topics.writing(table, [(row, new)]) as placed:
            placed.refused = storage.inventory.update(ServiceInventory, [(row, new)], placed.positions)
    topics.run_once()

    def versions() -> list[tuple[int, object]]:
        return [
            (r.offset, r.value["heartbeat_time"])
            for b in storage.topics.bounds("inventory")
            for r in storage.topics.read("inventory", b.partition, b.start, 100).records
        ]

    assert [beat for _, beat in versions()] == [1, 2, 3, 4, 5]
    assert versions()[0][0] == 0 and len({o for o, _ in versions()}) == 5
    assert {
        r.value["model"] for r in storage.topics.read("inventory", partition_of("web", 2), 0, 100).records
    } == {"service_inventory"}
    topics.keep(table, [storage.inventory.get_many(ServiceInventory, ["web"])["web"]])
    assert [beat for _, beat in versions()] == [1, 2, 3, 4, 5]


def test_a_filtered_read_returns_only_the_matching_versions_kept_or_current(storage: OpenStorage) -> None:
    """A read filtered by service, endpoint, time bucket and time published
    gets from the storage the versions that match and nothing else, whether
    they are kept in the history or still in their rows; a model without the
    column filtered by (a relation) matches nothing."""
    storage.metrics.install(METRICS_TYPES)
    storage.topics.install({"metrics": 1})
    topics = Topics(storage.topics, storage.records, storage.offsets, {Topic.METRICS: 1}, Instruments(), 60)

    def put(model: type[M], rows: list[M]) -> None:
        stored = storage.metrics.get_many(model, MINUTE, [r.key() for r in rows])
        versions = [(stored.get(r.key()), r) for r in rows]
        with topics.writing(Table(model, MINUTE), versions) as placed:
            assert placed.positions is not None
            writes = [
                MetricsWrite(old, new, {}, p)
                for (old, new), p in zip(versions, placed.positions, strict=True)
            ]
            outcome = storage.metrics.put(model, MINUTE, writes)
            assert not outcome.retry and not outcome.failed
            placed.refused = set()

    def endpoint(bucket: int, service: str, path: str, calls: int) -> EndpointMetrics:
        return EndpointMetrics(time_bucket=bucket, service=service, endpoint=path, calls=calls)

    for calls in (1, 2, 3):  # three versions of each row: two kept, one current
        put(
            EndpointMetrics,
            [endpoint(202611230900, s, p, calls) for s in ("shop", "db") for p in ("/a", "/b")],
        )
        put(EndpointMetrics, [endpoint(202611231000, "shop", "/a", calls)])
    put(ServiceRelationMetrics, [ServiceRelationMetrics(time_bucket=202611230900, source="shop", dest="db",
                                                        detect_point="client", calls=1)])  # fmt: skip
    topics.run_once()

    def read(where: Where) -> list[tuple[object, ...]]:
        b = storage.topics.bounds("metrics")[0]
        got = storage.topics.read("metrics", 0, b.start, 1000, where).records
        return sorted(
            (r.value["service"], r.value["endpoint"], r.value["time_bucket"], r.value["calls"]) for r in got
        )

    shop_a = [("shop", "/a", 202611230900, n) for n in (1, 2, 3)] + [
        ("shop", "/a", 202611231000, n) for n in (1, 2, 3)
    ]
    assert read(Where({"service": frozenset({"shop"}), "endpoint": frozenset({"/a"})})) == shop_a
    assert read(Where({"service": frozenset({"shop"}), "endpoint": frozenset({"/a"})},
                      {"time_bucket": (202611231000, None)})) == shop_a[3:]  # fmt: skip
    assert len(read(Where({"service": frozenset({"db", "shop"})}))) == 15
    assert read(Where({"service": frozenset({"nobody"})})) == []
    b = storage.topics.bounds("metrics")[0]
    everything = storage.topics.read("metrics", 0, b.start, 1000).records
    assert len(everything) == 16
    published = sorted(r.timestamp_ms for r in everything)
    after = Where(published=(published[-1], None))
    assert len(storage.topics.read("metrics", 0, b.start, 1000, after).records) == published.count(
        published[-1]
    )


def test_ends_moved_by_writers_at_once_end_at_the_highest(storage: OpenStorage) -> None:
    """Several writers move the ends of the same partitions at once (each
    write versioned, a conflict tried again): every end ends at the highest
    any writer gave it, and never moved down on the way."""
    storage.topics.install({"segment": 3})
    seen: dict[int, list[list[int]]] = {}

    def writer(first: int) -> None:
        for step in range(first, 60, 4):
            storage.topics.advance("segment", {p: step + p for p in range(3)})
            seen.setdefault(first, []).append([b.end for b in storage.topics.bounds("segment")])

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert storage.topics.bounds("segment") == [Bounds(0, 0, 59), Bounds(1, 0, 60), Bounds(2, 0, 61)]
    for ends in seen.values():  # what each writer saw after each move
        assert len(ends) == 15
        assert all(
            x <= y for before, after in itertools.pairwise(ends) for x, y in zip(before, after, strict=True)
        )
    storage.topics.advance("segment", {0: 10})  # never down
    assert storage.topics.bounds("segment")[0] == Bounds(0, 0, 59)


def test_retention_by_size_and_by_age_moves_the_start(storage: OpenStorage) -> None:
    topics = storage.topics
    topics.install({"metrics": 2})
    now_ms = int(time.time() * 1000)
    publish(topics, "metrics", 0, entries(4, "old", now_ms - 7_200_000))
    publish(topics, "metrics", 0, entries(6, "new", now_ms))
    publish(topics, "metrics", 1, entries(3, "new", now_ms))

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
    # Offsets go on after the end, whatever retention removed.
    assert publish(topics, "metrics", 0, entries(1)) == Bounds(0, 8, 11)
    assert topics.trim("metrics", Retention(3600, 2), now_ms) == {0: 1}


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
