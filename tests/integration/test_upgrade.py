"""Storage written by an earlier release: metrics rows stored before the
figures took SkyWalking's names (and services their apdex counts), and
instance relations stored before they had a client side, stay readable, and
the same tables and indices take the new columns."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from skyoap.model import sketch
from skyoap.model.metrics import (
    Downsampling,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
)
from skyoap.model.records import LogRecord
from skyoap.model.stream import ColumnType, Words
from skyoap.storage.api import MetricsWrite, PutOutcome, RecordSearch
from skyoap.storage.config import StorageKind
from skyoap.storage.elasticsearch.client import ElasticsearchClient, mapping_of
from skyoap.storage.elasticsearch.metrics import index_name
from skyoap.storage.embedded.metrics import table
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from tests.integration.helpers import eventually

NEW = {"cpm", "resp_time", "sla", "apdex", "apdex_satisfied", "apdex_tolerating"}
SQL = {ColumnType.INT: "INTEGER", ColumnType.FLOAT: "REAL", ColumnType.BOOL: "INTEGER"}


def test_a_metrics_table_or_index_of_an_earlier_release_takes_the_new_columns(
    node_config: NodeConfig,
) -> None:
    minute = 202611231000
    histogram = [0] * 6 + [4] + [0] * 22
    old_row = {"time_bucket": minute, "service": "shop", "calls": 4, "errors": 1, "latency_sum_ms": 40,
               "histogram": histogram, "latency_avg_ms": 10.0, "success_rate": 0.75}  # fmt: skip
    level = Downsampling.MINUTE
    config = node_config.storage
    if config.kind is StorageKind.EMBEDDED:
        name = table(ServiceMetrics, level)
        columns = [c for c in ServiceMetrics.stored_columns() if c.name not in NEW]
        with sqlite3.connect(config.embedded_path) as db:
            db.execute(
                f"CREATE TABLE {name} (key TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_rounds TEXT "
                "NOT NULL DEFAULT '{}', latency_avg_ms REAL, success_rate REAL, "
                + ", ".join(f"{c.name} {SQL.get(c.type, 'TEXT')}" for c in columns)
                + ")"
            )
            db.execute(
                f"INSERT INTO {name} (key, version, time_bucket, service, calls, errors, latency_sum_ms, "
                "histogram, latency_avg_ms, success_rate) VALUES (?, 1, ?, ?, 4, 1, 40, ?, 10.0, 0.75)",
                (
                    f"{minute}\x1fshop",
                    minute,
                    "shop",
                    json.dumps(histogram, separators=(",", ":")),
                ),
            )
    else:
        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        properties = {k: v for k, v in mapping_of(ServiceMetrics)["properties"].items() if k not in NEW}
        properties.update(latency_avg_ms={"type": "double"}, success_rate={"type": "double"})
        index = f"{client.index(index_name(ServiceMetrics, level))}-20261123"
        client.es.indices.create(index=index, mappings={"dynamic": "strict", "properties": properties})
        client.es.index(index=index, id=f"{minute}\x1fshop", document=old_row, refresh=True)
        client.close()

    storage = open_storage(config)
    try:
        storage.metrics.install([ServiceMetrics])
        (old,) = storage.metrics.query(ServiceMetrics, level, minute, minute)
        assert (old.calls, old.errors, old.apdex_satisfied, old.sla, old.resp_time) == (4, 1, 0, 7500, 10)
        # Its fixed buckets read as the sketch of their lower bounds: 4 calls of 10 ms.
        assert (old.histogram, old.percentile(99)) == (sketch.of_latencies([10] * 4), 10)
        later = ServiceMetrics(time_bucket=minute + 1, service="shop", calls=2, latency_sum_ms=8,
                               histogram=sketch.of_latencies([4, 4]), apdex_satisfied=2)  # fmt: skip
        assert not storage.metrics.put(ServiceMetrics, level, [MetricsWrite(None, later, {})]).failed
        found = storage.metrics.get_many(ServiceMetrics, level, [later.key()])
        assert found[later.key()].item == later
    finally:
        storage.close()


def relation(calls: int, latency_ms: int, detect_point: str = "server") -> ServiceInstanceRelationMetrics:
    """Calls of shop-1 to orders-1 in one minute, each of ``latency_ms``."""
    return ServiceInstanceRelationMetrics(
        time_bucket=202611231000, source_service="shop", source_instance="shop-1", dest_service="orders",
        dest_instance="orders-1", detect_point=detect_point, calls=calls, latency_sum_ms=calls * latency_ms,
        histogram=sketch.of_latencies([latency_ms] * calls),
    )  # fmt: skip


def test_an_instance_relation_of_an_earlier_release_is_the_servers_and_goes_on_merging(
    node_config: NodeConfig,
) -> None:
    level, model = Downsampling.MINUTE, ServiceInstanceRelationMetrics
    old = relation(2, 10)
    old_row = {k: v for k, v in old.to_row().items() if k != "detect_point"}
    old_key = "\x1f".join(["202611231000", "shop", "shop-1", "orders", "orders-1"])  # no side then
    config = node_config.storage
    if config.kind is StorageKind.EMBEDDED:
        name = table(model, level)
        columns = [c for c in model.stored_columns() if c.name != "detect_point"]
        with sqlite3.connect(config.embedded_path) as db:
            db.execute(
                f"CREATE TABLE {name} (key TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_rounds TEXT "
                "NOT NULL DEFAULT '{}', "
                + ", ".join(f"{c.name} {SQL.get(c.type, 'TEXT')}" for c in columns)
                + ")"
            )
            values = [json.dumps(v) if isinstance(v, tuple) else v for v in old_row.values()]
            marks = ", ".join("?" * len(old_row))
            db.execute(
                f"INSERT INTO {name} (key, version, {', '.join(old_row)}) VALUES (?, 1, {marks})",
                [old_key, *values],
            )
    else:
        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        properties = {k: v for k, v in mapping_of(model)["properties"].items() if k != "detect_point"}
        index = f"{client.index(index_name(model, level))}-20261123"
        client.es.indices.create(index=index, mappings={"dynamic": "strict", "properties": properties})
        client.es.index(index=index, id=old_key, document=old_row, refresh=True)
        client.close()

    storage = open_storage(config)
    try:
        storage.metrics.install([model])
        assert storage.metrics.query(model, level, old.time_bucket, old.time_bucket) == [old]
        # The server's side of the same minute merges into that row; the client's is a row of its own.
        server, client_side = relation(1, 10), relation(1, 12, "client")
        found = storage.metrics.get_many(model, level, [server.key(), client_side.key()])
        assert list(found) == [old_key]
        writes = [MetricsWrite(found[old_key], old.combine(server), {}), MetricsWrite(None, client_side, {})]
        assert storage.metrics.put(model, level, writes) == PutOutcome()
        eventually(
            lambda: (
                {
                    (r.detect_point, r.calls, r.latency_sum_ms)
                    for r in storage.metrics.query(model, level, old.time_bucket, old.time_bucket)
                }
                == {("server", 3, 30), ("client", 1, 12)}
            )
        )
    finally:
        storage.close()


def test_logs_of_an_earlier_release_stay_readable_and_later_ones_are_found_by_keyword(
    node_config: NodeConfig,
) -> None:
    """Elasticsearch indexed no log content before keywords were searched:
    an index of then takes the words field, its old logs are read as before
    but are not found by keyword; SQLite searches every row's text."""
    minute = 202611231000
    old = LogRecord(time_bucket=minute, log_id="old", timestamp=1, service="shop", instance="shop-1",
                    endpoint="/buy", trace_id="t", segment_id="s", span_id=0, content_type="text",
                    content=Words("buying failed"), tags={})  # fmt: skip
    config = node_config.storage
    if config.kind is StorageKind.ELASTICSEARCH:
        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        properties = mapping_of(LogRecord)["properties"]
        properties["content"] = {"type": "text", "index": False}
        index = f"{client.index(LogRecord.MODEL)}-20261123"
        client.es.indices.create(index=index, mappings={"dynamic": "strict", "properties": properties})
        client.es.index(index=index, id="old", document=old.to_row(), refresh=True)
        client.close()
    storage = open_storage(config)
    try:
        storage.records.install([LogRecord])
        if config.kind is StorageKind.EMBEDDED:
            storage.records.insert(LogRecord, [old])
        new = dataclasses.replace(old, log_id="new", timestamp=2, content=Words("buying failed again"))
        assert storage.records.insert(LogRecord, [new]) == {}
        day = RecordSearch(first_bucket=minute, last_bucket=minute, order_by="timestamp")

        def found(**search: Any) -> list[str]:
            return [r.log_id for r in storage.records.search(LogRecord, dataclasses.replace(day, **search))]

        eventually(lambda: found() == ["new", "old"])
        by_keyword = ["new", "old"] if config.kind is StorageKind.EMBEDDED else ["new"]
        assert found(contains={"content": ["Buying failed"]}) == by_keyword
        assert found(lacks={"content": ["again"]}) == ["old"]
    finally:
        storage.close()
