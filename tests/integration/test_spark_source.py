"""The Spark data source on a local SparkSession: batch reads of topics and
tables, and a streaming query that keeps up with a growing topic and resumes
from its checkpoint with nothing lost and nothing twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from consumer.group import Group
from storage.select import OpenStorage
from tests.entries import Entry, publish
from tests.integration.helpers import eventually, storage_options
from wiring.config import NodeConfig


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
            .option("startingOffsets", "earliest").option("maxRecordsPerTrigger", "15")
            .option("group", "spark-sink").load()
        )  # fmt: skip
        return (
            stream.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            .trigger(processingTime="0.5 seconds").start()
        )  # fmt: skip

    query = start()
    try:
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(40,)], timeout_s=120)
        # No batch went past the limit.
        assert max(n for (n,) in sink.query("SELECT COUNT(*) FROM deliveries GROUP BY batch")) <= 15
        append(storage, 1, 10, 20)  # the topic grows while the query runs
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(60,)], timeout_s=120)
        # Progress reported to the group: a batch is committed once the next one
        # starts, and partition 0 was finished before partition 1 grew.
        eventually(lambda: Group(storage.state, "spark-sink").committed("inventory/0") == 29, timeout_s=60)
    finally:
        query.stop()
    append(storage, 0, 30, 10)  # and while it is stopped
    query = start()
    try:
        eventually(lambda: sink.query("SELECT COUNT(*) FROM seen") == [(70,)], timeout_s=120)
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
    from model.topics import Retention

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
