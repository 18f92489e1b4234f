"""Time to live on real storage: a node stores a day of telemetry, and the
test moves the housekeeper's clock forward day by day; each kind of data goes
on the day its time to live says, and not before."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from elasticsearch import ApiError, Elasticsearch

from skyoap.aggregator.config import TtlConfig
from skyoap.aggregator.housekeeping import TimeToLive
from skyoap.aggregator.topics import Topics
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.inventory import (
    INVENTORY_TYPES,
    EndpointInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import METRICS_TYPES, Downsampling, EndpointMetrics, ServiceMetrics, minute_bucket
from skyoap.model.records import RECORD_MODELS, SegmentRecord
from skyoap.model.topics import Table, Topic
from skyoap.proto.skywalking import tracing_pb2
from skyoap.runtime.instruments import Instruments
from skyoap.storage.api import MetricsWrite
from skyoap.storage.elasticsearch.client import ElasticsearchClient
from skyoap.storage.elasticsearch.metrics import ElasticsearchMetricsDAO
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.conftest import wipe
from tests.integration.helpers import eventually, stored
from tests.integration.telemetry_data import collect, span

DAY_S = 86_400
ALL_BUCKETS = (0, 99_999_999_999_999)


def segment(i: int, instance: str, endpoint: str, now_ms: int) -> tracing_pb2.SegmentObject:
    return tracing_pb2.SegmentObject(
        traceId=f"t{i}",
        traceSegmentId=f"s{i}",
        service="shop",
        serviceInstance=instance,
        spans=[span(0, -1, tracing_pb2.Entry, now_ms, 4, False, operationName=endpoint)],
    )


def counts(storage: OpenStorage, level: Downsampling) -> dict[str, int]:
    """The rows of each metrics model at ``level``, by the name TTL reports them under."""
    found = {
        f"{m.MODEL}_{level.value}": len(storage.metrics.query(m, level, *ALL_BUCKETS)) for m in METRICS_TYPES
    }
    return {name: n for name, n in found.items() if n}


def row_topics(storage: OpenStorage, config: NodeConfig) -> Topics:
    """The topics as an aggregator's writers have them (rounds run when the test says)."""
    partitions = {t: config.topics.partitions for t in Topic}
    return Topics(storage.topics, storage.records, storage.offsets, partitions, Instruments(), interval_s=60)


def housekeeper(
    storage: OpenStorage, config: NodeConfig, clock: list[float], topics: Topics | None = None
) -> TimeToLive:
    """The aggregators' housekeeping with the default times to live, on a clock the test moves."""
    return TimeToLive(
        TtlConfig().ttl(),
        storage.inventory,
        storage.metrics,
        storage.topics,
        storage.sequences,
        interval_s=60,
        row_topics=topics or row_topics(storage, config),
        clock=lambda: clock[0],
    )


def inventory_topic_keys(storage: OpenStorage) -> set[str]:
    keys: set[str] = set()
    for b in storage.topics.bounds(Topic.INVENTORY.value):
        offset = b.start
        while offset < b.end:
            fetched = storage.topics.read(Topic.INVENTORY.value, b.partition, offset, 1000)
            keys.update(r.value["key"] for r in fetched.records)
            offset = fetched.next_offset
    return keys


@pytest.fixture
def ttl_config(node_config: NodeConfig) -> NodeConfig:
    return node_config.with_options(
        metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2, cache_max_age_s=0.3
    )


def test_each_kind_of_data_goes_on_the_day_its_time_to_live_says(
    ttl_config: NodeConfig, start_node: Callable[[NodeConfig], Node], storage: OpenStorage
) -> None:
    config = ttl_config
    node = start_node(config)
    now_s = time.time()
    now_ms = int(now_s * 1000)
    sent = [
        segment(0, "shop-1", "/a", now_ms),
        segment(1, "shop-1", "/a", now_ms),
        segment(2, "shop-2", "/a", now_ms),
        segment(3, "shop-2", "/b", now_ms),
        segment(4, "shop-2", "/b", now_ms),
    ]
    collect(node.address, sent)
    minute = minute_bucket(now_ms)
    today = minute // 10_000

    def endpoint_calls(level: Downsampling) -> dict[str, int]:
        rows = storage.metrics.query(EndpointMetrics, level, *ALL_BUCKETS)
        return {m.endpoint: m.calls for m in rows}

    # Every row the segments give, at every level, before anything is counted:
    # the models are persisted one after another, and a row still on its way
    # would be removed, and counted, beside those the snapshot saw.
    # No segment names its caller: their relations are User's, to shop, to
    # each of its two instances and to each of its two endpoints.
    rows = {
        "service_metrics": 1,
        "service_instance_metrics": 2,
        "endpoint_metrics": 2,
        "service_relation_metrics": 1,
        "service_instance_relation_metrics": 2,
        "endpoint_relation_metrics": 2,
    }
    before = {level: {f"{model}_{level.value}": n for model, n in rows.items()} for level in Downsampling}
    for level in Downsampling:
        eventually(functools.partial(lambda lv: counts(storage, lv) == before[lv], level))
        eventually(
            functools.partial(lambda lv: endpoint_calls(lv) == {"/a": 3, "/b": 2}, level), timeout_s=60
        )
    eventually(lambda: len(storage.records.query(SegmentRecord, minute, minute)) == 5)
    eventually(lambda: len(stored(config.storage, EndpointInventory)) == 2)
    eventually(lambda: len(stored(config.storage, ServiceInstanceInventory)) == 2)
    on_topic = eventually(lambda: {k for k in inventory_topic_keys(storage) if "/b" in k or "shop-1" in k})
    assert len(on_topic) == 2

    clock = [now_s]
    ttl_topics = row_topics(storage, config)
    ttl = housekeeper(storage, config, clock, ttl_topics)
    assert ttl.run_once() == {}

    # A day later the minutes are still kept: minute metrics live one day.
    clock[0] = now_s + 1 * DAY_S
    assert ttl.run_once() == {}

    clock[0] = now_s + 2 * DAY_S
    assert ttl.run_once() == before[Downsampling.MINUTE]
    assert counts(storage, Downsampling.MINUTE) == {}
    assert counts(storage, Downsampling.HOUR) == before[Downsampling.HOUR]

    # Records live three days, and their topic starts after what is gone.
    clock[0] = now_s + 3 * DAY_S
    assert ttl.run_once() == {}
    clock[0] = now_s + 4 * DAY_S
    assert ttl.run_once() == {"segment": 5}
    assert storage.records.query(SegmentRecord, *ALL_BUCKETS) == []
    assert all(b.start == b.end for b in storage.topics.bounds(Topic.SEGMENT.value))

    # shop-1 falls silent and is marked inactive; shop-2 stays active. /a is
    # measured five days on, /b never again.
    instances = {
        s.item.name: s for s in storage.inventory.stale(ServiceInstanceInventory, int(time.time() * 1000) + 1)
    }
    shop_1 = instances["shop-1"]
    inactive = [(shop_1, dataclasses.replace(shop_1.item, active=False))]
    with ttl_topics.writing(Table(ServiceInstanceInventory), inactive) as placed:  # as HeartbeatExpiry does
        placed.refused = storage.inventory.update(ServiceInstanceInventory, inactive, placed.positions)
    ttl_topics.run_once()
    shop_1 = storage.inventory.stale(ServiceInstanceInventory, int(time.time() * 1000) + 1, active=False)[0]
    later = EndpointMetrics(time_bucket=today_plus(today, 5), service="shop", endpoint="/a", calls=1)
    assert (
        storage.metrics.put(EndpointMetrics, Downsampling.DAY, [MetricsWrite(None, later, {})]).failed == {}
    )
    endpoints = {e.name: e for e in stored(config.storage, EndpointInventory)}

    clock[0] = now_s + 7 * DAY_S
    assert ttl.run_once() == {}
    clock[0] = now_s + 8 * DAY_S
    assert ttl.run_once() == {
        **before[Downsampling.HOUR],
        "service_instance_inventory": 1,
        "endpoint_inventory": 1,
    }
    assert [i.name for i in stored(config.storage, ServiceInstanceInventory)] == ["shop-2"]
    assert [e.name for e in stored(config.storage, EndpointInventory)] == ["/a"]
    assert [s.name for s in stored(config.storage, ServiceInventory)] == ["shop"]
    # The removed rows' last versions stay on the inventory topic.
    assert {shop_1.item.key(), endpoints["/b"].key()} <= inventory_topic_keys(storage)
    assert on_topic == {shop_1.item.key(), endpoints["/b"].key()}

    # Day metrics live ninety days (in Elasticsearch, whole months). /a was
    # last measured 85 days before: it goes.
    clock[0] = now_s + 90 * DAY_S
    assert ttl.run_once() == {"endpoint_inventory": 1}
    clock[0] = now_s + 160 * DAY_S
    day_rows = dict(
        before[Downsampling.DAY], endpoint_metrics_day=before[Downsampling.DAY]["endpoint_metrics_day"] + 1
    )
    assert ttl.run_once() == day_rows
    assert counts(storage, Downsampling.DAY) == {}

    # A removed endpoint measured again is registered again, under a new id.
    def measured_again() -> list[int]:
        collect(node.address, [segment(5, "shop-2", "/b", int(time.time() * 1000))])
        return [e.sequence for e in stored(config.storage, EndpointInventory) if e.name == "/b"]

    back = eventually(measured_again, 60, interval_s=0.5)
    assert back[0] > endpoints["/b"].sequence


def today_plus(day: int, days: int) -> int:
    d = datetime.date(day // 10_000, day // 100 % 100, day % 100) + datetime.timedelta(days=days)
    return int(f"{d:%Y%m%d}")


def install(storage: OpenStorage) -> None:
    storage.inventory.install(INVENTORY_TYPES)
    storage.metrics.install(METRICS_TYPES)
    storage.records.install(list(RECORD_MODELS.values()))
    storage.topics.install({t.value: 2 for t in Topic})


def test_one_aggregator_at_a_time_removes_under_the_global_lock(
    storage: OpenStorage, node_config: NodeConfig
) -> None:
    install(storage)
    old = ServiceMetrics(time_bucket=202001010000, service="old", calls=1)
    storage.metrics.put(ServiceMetrics, Downsampling.MINUTE, [MetricsWrite(None, old, {})])
    clock = [time.time()]
    ttl = housekeeper(storage, node_config, clock)
    result: list[dict[str, int]] = []
    with storage.sequences.lock(TimeToLive.SCOPE):
        worker = threading.Thread(target=lambda: result.append(ttl.run_once()))
        worker.start()
        worker.join(1.0)
        assert worker.is_alive()
        assert len(storage.metrics.get_many(ServiceMetrics, Downsampling.MINUTE, [old.key()])) == 1
    worker.join(30)
    assert result == [{"service_metrics_minute": 1}]
    assert storage.metrics.get_many(ServiceMetrics, Downsampling.MINUTE, [old.key()]) == {}


def test_a_row_that_changed_since_it_was_found_is_not_removed(storage: OpenStorage) -> None:
    install(storage)
    row = ServiceInstanceInventory(
        name="i", service_id=1, instance_uuid="u", sequence=7, heartbeat_time=1, active=False
    )
    storage.inventory.reserve_sequences(ServiceInstanceInventory, 7, 7)
    assert storage.inventory.insert(ServiceInstanceInventory, [row]).inserted == [row.key()]
    (found,) = storage.inventory.stale(ServiceInstanceInventory, 2, active=False)
    beat = dataclasses.replace(row, heartbeat_time=5, active=True)
    assert storage.inventory.update(ServiceInstanceInventory, [(found, beat)]) == []
    assert storage.inventory.remove(ServiceInstanceInventory, [found]) == [row.key()]
    assert storage.inventory.get_many(ServiceInstanceInventory, [row.key()])[row.key()].item == beat


def test_rows_of_the_single_index_of_an_earlier_release_move_into_day_indices(
    es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    prefix = f"t{uuid.uuid4().hex[:12]}"
    client = ElasticsearchClient(es_server.url, prefix)
    es: Elasticsearch = client.es
    single = f"{prefix}_service_metrics_minute"
    rows = [
        ServiceMetrics(time_bucket=202611210905, service="a", calls=2),
        ServiceMetrics(time_bucket=202611221000, service="a", calls=3),
    ]
    for m in rows:
        es.index(index=single, id=m.key(), document={**m.to_row(), "applied_rounds": {"n1": 4}})
    es.indices.refresh(index=single)
    dao = ElasticsearchMetricsDAO(client)
    try:
        dao.install([ServiceMetrics])
        assert not es.indices.exists(index=single)
        assert sorted(es.indices.get(index=f"{single}-*")) == [f"{single}-20261121", f"{single}-20261122"]
        found = dao.get_many(ServiceMetrics, Downsampling.MINUTE, [m.key() for m in rows])
        assert {k: (s.item.calls, dict(s.rounds)) for k, s in found.items()} == {
            rows[0].key(): (2, {"n1": 4}),
            rows[1].key(): (3, {"n1": 4}),
        }
        dao.install([ServiceMetrics])  # a second start finds nothing to move
        queried = dao.query(ServiceMetrics, Downsampling.MINUTE, 202611210000, 202611232359)
        assert [(m.time_bucket, m.calls) for m in queried] == [(202611221000, 3), (202611210905, 2)]
    finally:
        dao.close()
        wipe(es_server.url, redis_server.url, prefix)


class _OnFirst(logging.Handler):
    """Runs ``action`` on its own thread at the first record it handles."""

    def __init__(self, action: Callable[[], object]) -> None:
        super().__init__(logging.DEBUG)
        self.fired = threading.Event()
        self._action = action

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired.is_set():
            self.fired.set()
            threading.Thread(target=self._action, daemon=True).start()


def test_a_search_waits_for_the_shards_of_an_index_being_created(
    es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    """An index a write is creating (each model's first row of a day creates
    that day's index) answers searches 503 until its shard has started; a
    query meeting it then waits for the shard rather than failing. Here the
    shard may start only once the query was refused."""
    prefix = f"t{uuid.uuid4().hex[:12]}"
    client = ElasticsearchClient(es_server.url, prefix)
    dao = ElasticsearchMetricsDAO(client)
    es: Elasticsearch = client.es
    index = f"{prefix}_service_metrics_minute-20261124"
    only_on = "index.routing.allocation.include._name"
    starting = _OnFirst(lambda: es.indices.put_settings(index=index, settings={only_on: None}))
    logger = logging.getLogger("skyoap.storage.elasticsearch.client")
    previous = logger.level
    try:
        dao.install([ServiceMetrics])
        es.indices.create(index=index, settings={only_on: "no-such-node"}, wait_for_active_shards="0")
        with Elasticsearch(es_server.url, max_retries=0) as plain, pytest.raises(ApiError) as refused:
            plain.count(index=index)  # the state a query meets
        assert refused.value.meta.status == 503
        logger.addHandler(starting)
        logger.setLevel(logging.DEBUG)
        assert dao.query(ServiceMetrics, Downsampling.MINUTE, 202611240000, 202611242359) == []
        assert starting.fired.is_set()
    finally:
        logger.removeHandler(starting)
        logger.setLevel(previous)
        dao.close()
        wipe(es_server.url, redis_server.url, prefix)
