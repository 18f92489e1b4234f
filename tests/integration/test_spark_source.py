"""The Spark data source on a local SparkSession: batch reads of topics and
tables, and a streaming query that keeps up with a growing topic and resumes
from its checkpoint with nothing lost and nothing twice."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import EqualTo, In, StringStartsWith

from skyoap.aggregator.records import insert_published
from skyoap.analytics.source import FilteringTopicReader
from skyoap.consumer.group import Group
from skyoap.model.records import AlarmRecord, SegmentRecord
from skyoap.model.topics import Topic
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from tests.alarm_records import firings
from tests.entries import Entry, publish
from tests.integration.helpers import eventually, storage_options
from tests.integration.segments import PARTITIONS, install, record_topics, segments, write


def append(storage: OpenStorage, partition: int, first: int, count: int) -> None:
    publish(
        storage.topics,
        "inventory",
        partition,
        [Entry(f"k{i}", {"n": i}, 1_000) for i in range(first, first + count)],
    )


def test_a_topic_reads_as_a_dataframe(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage
) -> None:
    # A table no node has written to reads as empty.
    empty = (
        spark.read.format("skyoap")
        .options(**storage_options(node_config.storage))
        .option("table", "endpoint_metrics")
    )
    assert empty.load().count() == 0
    storage.topics.install({"inventory": 2})
    append(storage, 0, 0, 3)
    append(storage, 1, 3, 2)
    df = (
        spark.read.format("skyoap")
        .options(**storage_options(node_config.storage))
        .option("topic", "inventory")
        .load()
    )
    rows = sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())
    assert rows == [
        (0, 0, "k0", '{"n":0}'), (0, 1, "k1", '{"n":1}'), (0, 2, "k2", '{"n":2}'),
        (1, 0, "k3", '{"n":3}'), (1, 1, "k4", '{"n":4}'),
    ]  # fmt: skip


def stored_segments(storage: OpenStorage) -> list[SegmentRecord]:
    """Forty segments on the segment topic: two services, two endpoints each,
    two minutes, every tenth an error; the second twenty published at least
    a millisecond after the first."""
    install(storage)
    topics = record_topics(storage)
    items = [
        dataclasses.replace(
            s,
            service=("shop", "db")[i % 2],
            endpoint=f"/{i % 4 // 2}",
            time_bucket=202611230900 + i // 20,
            is_error=i % 10 == 0,
        )
        for i, s in enumerate(segments(40))
    ]
    write(topics, storage, items[:20])
    time.sleep(0.01)
    write(topics, storage, items[20:])
    topics.run_once()
    return items


def test_a_topic_reads_with_typed_columns_and_its_filters_run_in_the_storage(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage
) -> None:
    items = {s.segment_id: s for s in stored_segments(storage)}
    options = {**storage_options(node_config.storage), "topic": "segment"}
    df = spark.read.format("skyoap").options(**options).load()
    assert df.columns[:6] == ["topic", "partition", "offset", "timestamp", "key", "value"]
    rows = df.collect()
    assert len(rows) == 40
    for r in rows:  # each typed column holds the stored field, and so does the JSON value
        s = items[r.key]
        assert (r.segment_id, r.service, r.endpoint, r.time_bucket, r.latency_ms, r.is_error, r.data) == (
            s.segment_id, s.service, s.endpoint, s.time_bucket, s.latency_ms, s.is_error, s.data
        )  # fmt: skip
        assert json.loads(r.value) == {"key": s.segment_id, **s.to_row()}
        assert r.topic == "segment"

    def count(condition: str) -> int:
        """The entries matching ``condition``, from a DataFrame loaded for it
        alone (pyspark 4.3 keeps a DataFrame's last pushed filters)."""
        pushing = spark.read.format("skyoap").options(**options).option("pushFilters", "true").load()
        n = pushing.where(condition).count()
        assert n == df.where(condition).count()  # what Spark finds when it filters alone
        return n

    assert count("service = 'shop'") == 20
    assert count("service = 'shop' AND endpoint IN ('/1')") == 10
    assert count("time_bucket >= 202611230901") == 20
    assert count("time_bucket > 202611230900 AND time_bucket < 202611230901") == 0
    assert count("partition = 1") == sum(1 for r in rows if r.partition == 1)
    assert count("is_error AND service = 'shop'") == 4  # is_error is left to Spark
    published = sorted(r.ms for r in df.selectExpr("unix_millis(timestamp) AS ms").collect())
    assert published[19] < published[20]
    second = published[20]  # when the second twenty were published
    assert count(f"timestamp >= timestamp_millis({second})") == 20
    assert count(f"timestamp < timestamp_millis({second})") == 20

    # The storage ran the filters: the source fetched only the entries that match.
    reader = FilteringTopicReader({k.lower(): v for k, v in options.items()}, Topic.SEGMENT)
    starts_with = StringStartsWith(("trace_id",), "t1")
    filters = [EqualTo(("service",), "shop"), In(("endpoint",), ("/1",)), starts_with]
    assert list(reader.pushFilters(filters)) == [starts_with]
    fetched = [b.to_pylist() for p in reader.partitions() for b in reader.read(p)]
    assert sorted(r["key"] for batch in fetched for r in batch) == sorted(
        k for k, s in items.items() if (s.service, s.endpoint) == ("shop", "/1")
    )


def test_the_alarm_topic_holds_each_firing_then_its_recovery(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage
) -> None:
    """Alarms are published as the rules store them (``insert_published``):
    a firing, then its recovery."""
    storage.records.install([AlarmRecord])
    storage.topics.install({t.value: n for t, n in PARTITIONS.items()})
    topics = record_topics(storage)
    t0 = 1_795_000_000_000
    fired = [a for a in firings(t0) if a.uuid == "shop-inst-sla"]
    recovered = [
        dataclasses.replace(a, alarm_id="shop-inst-sla/recovery", recovery_time=t0 + 190_000) for a in fired
    ]
    for records in (fired, recovered):
        assert insert_published(storage.records, AlarmRecord, records, 0, topics) == {}
    topics.run_once()
    options = {**storage_options(node_config.storage), "topic": "alarm"}
    rows = spark.read.format("skyoap").options(**options).load().orderBy("offset").collect()
    assert [(r.key, r.uuid, r.rule_name, r.recovery_time) for r in rows] == [
        ("shop-inst-sla", "shop-inst-sla", "instance_sla_rule", 0),
        ("shop-inst-sla/recovery", "shop-inst-sla", "instance_sla_rule", t0 + 190_000),
    ]


def test_a_topic_read_starts_and_ends_where_kafkas_options_say(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage
) -> None:
    stored_segments(storage)
    options = {**storage_options(node_config.storage), "topic": "segment"}

    def read(**more: str) -> list[tuple[int, int]]:
        df = spark.read.format("skyoap").options(**options).options(**more).load()
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    everything = read()
    ends = {p: max(o for q, o in everything if q == p) + 1 for p in (0, 1)}
    kafka_form = {
        "startingOffsets": '{"segment": {"0": 2, "1": -2}}',
        "endingOffsets": '{"segment": {"0": -1, "1": 3}}',
    }
    assert read(**kafka_form) == [*((0, o) for o in range(2, ends[0])), (1, 0), (1, 1), (1, 2)]
    assert read(startingOffsets='{"1": 4}') == [
        *((0, o) for o in range(ends[0])),
        *((1, o) for o in range(4, ends[1])),
    ]
    df = spark.read.format("skyoap").options(**options).load()
    by_time = sorted(
        tuple(r) for r in df.selectExpr("unix_millis(timestamp)", "partition", "offset").collect()
    )
    second = by_time[20][0]  # when the second twenty were published
    assert read(startingTimestamp=str(second)) == sorted((p, o) for t, p, o in by_time if t >= second)
    assert read(endingTimestamp=str(second)) == sorted((p, o) for t, p, o in by_time if t < second)
    assert read(startingTimestamp="4102444800000") == []  # 2100: nothing that recent
    split = spark.read.format("skyoap").options(**options).option("minPartitions", "8").load()
    assert split.rdd.getNumPartitions() >= 8 and split.count() == 40
    with pytest.raises(Exception, match=r"startingOffsets must be earliest, latest or JSON like"):
        read(startingOffsets="first")
    with pytest.raises(Exception, match=r"topic segment has no partition 7 \(endingOffsets\)"):
        read(endingOffsets='{"7": 1}')


class Sink:
    """An idempotent sink: a table keyed by (partition, offset), and a log of
    every delivery (so duplicates show even though the table hides them)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        with sqlite3.connect(self.path) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS seen (partition INTEGER, offset INTEGER, "
                "PRIMARY KEY (partition, offset))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS deliveries (batch INTEGER, partition INTEGER, offset INTEGER)"
            )

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        rows = [(r.partition, r.offset) for r in batch.select("partition", "offset").collect()]
        with sqlite3.connect(self.path) as db:
            db.executemany("INSERT OR IGNORE INTO seen VALUES (?, ?)", rows)
            db.executemany("INSERT INTO deliveries VALUES (?, ?, ?)", [(batch_id, p, o) for p, o in rows])

    def query(self, sql: str) -> list[Any]:
        with sqlite3.connect(self.path) as db:
            return db.execute(sql).fetchall()


def test_a_stream_follows_a_growing_topic_and_resumes_from_its_checkpoint(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage, tmp_path: Path
) -> None:
    storage.topics.install({"inventory": 2})
    append(storage, 0, 0, 30)
    append(storage, 1, 0, 10)
    sink = Sink(tmp_path / "sink.db")
    checkpoint = str(tmp_path / "checkpoint")

    def start() -> Any:
        stream = (
            spark.readStream.format("skyoap")
            .options(**storage_options(node_config.storage))
            .option("topic", "inventory")
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "15")
            .option("group", "spark-sink").load()
        )  # fmt: skip
        return (
            stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            .trigger(processingTime="0.5 seconds").start()
        )  # fmt: skip

    query = start()
    try:
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(40,)])
        # No batch went past the limit.
        assert max(n for (n,) in sink.query("SELECT COUNT(*) FROM deliveries GROUP BY batch")) <= 15
        append(storage, 1, 10, 20)  # the topic grows while the query runs
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(60,)])
        # Progress reported to the group: a batch is committed once the next one
        # starts, and partition 0 was finished before partition 1 grew.
        eventually(lambda: Group(storage.state, "spark-sink").committed("inventory/0") == 29)
    finally:
        query.stop()
    append(storage, 0, 30, 10)  # and while it is stopped
    query = start()
    try:
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(70,)])
    finally:
        query.stop()
    by_partition = "SELECT partition, COUNT(*), MIN(offset), MAX(offset) FROM seen GROUP BY partition"
    assert sink.query(by_partition) == [(0, 40, 0, 39), (1, 30, 0, 29)]
    # Every record was delivered in exactly one batch, across the restart. A
    # query stopped while its sink ran replays that batch (same id, same
    # records) on restart, as foreachBatch sinks must expect; no record ever
    # comes back in another batch.
    assert sink.query("SELECT COUNT(*) FROM (SELECT DISTINCT batch, partition, offset FROM deliveries)") == [
        (70,)
    ]
    twice = (
        "SELECT partition, offset FROM deliveries GROUP BY partition, offset HAVING COUNT(DISTINCT batch) > 1"
    )
    assert sink.query(twice) == []


def test_a_stream_whose_offsets_retention_removed_fails_unless_told_to_skip(
    spark: SparkSession, node_config: NodeConfig, storage: OpenStorage, tmp_path: Path
) -> None:
    from skyoap.model.topics import Retention

    storage.topics.install({"inventory": 1})
    append(storage, 0, 0, 10)
    options = {**storage_options(node_config.storage), "topic": "inventory", "startingOffsets": '{"0": 2}'}
    storage.topics.trim("inventory", Retention(3600 * 24 * 365 * 100, 5), 2_000)
    sink = Sink(tmp_path / "sink.db")

    query = (
        spark.readStream.format("skyoap").options(**options).load().writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start()
    )  # fmt: skip
    lost = (
        r"offsets 2 to 4 of inventory/0 were removed by retention before this query read them; "
        r"set failOnDataLoss"
    )
    with pytest.raises(Exception, match=lost):
        query.awaitTermination()

    query = (
        spark.readStream.format("skyoap").options(**options).option("failOnDataLoss", "false").load()
        .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "c2"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    assert sink.query("SELECT offset FROM seen ORDER BY offset") == [(5,), (6,), (7,), (8,), (9,)]
