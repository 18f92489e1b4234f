"""The analysts' jobs on a known data set, on a local SparkSession."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from skyoap.analytics.jobs import (
    Dependency,
    SlowEndpoint,
    Spike,
    SpikeDetector,
    dependencies,
    error_spikes,
    slowest_endpoints,
)
from skyoap.model import sketch
from skyoap.model.metrics import (
    METRICS_TYPES,
    Downsampling,
    EndpointMetrics,
    ServiceRelationMetrics,
)
from skyoap.storage.api import MetricsWrite
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from tests.entries import Entry, publish
from tests.integration.helpers import eventually, storage_options

MINUTE = Downsampling.MINUTE


def endpoint(bucket: int, service: str, name: str, latencies: list[int], errors: int) -> EndpointMetrics:
    return EndpointMetrics(
        time_bucket=bucket, service=service, endpoint=name, calls=len(latencies), errors=errors,
        latency_sum_ms=sum(latencies), histogram=sketch.of_latencies(latencies),
    )  # fmt: skip


def relation(
    bucket: int, source: str, dest: str, point: str, calls: int, errors: int
) -> ServiceRelationMetrics:
    return ServiceRelationMetrics(
        time_bucket=bucket, source=source, dest=dest, detect_point=point, calls=calls, errors=errors,
        latency_sum_ms=calls, histogram=sketch.of_latencies([1] * calls),
    )  # fmt: skip


def test_slowest_endpoints_and_dependencies(
    spark: SparkSession,
    node_config: NodeConfig,
    storage: OpenStorage,
) -> None:
    now_ms = int(time.time() * 1000)
    b1, b2 = MINUTE.bucket_of(now_ms - 300_000), MINUTE.bucket_of(now_ms - 240_000)
    old = MINUTE.bucket_of(now_ms - 3 * 3_600_000)  # outside the window
    storage.metrics.install(METRICS_TYPES)
    endpoints = [
        endpoint(b1, "shop", "/a", [90] * 9 + [400], 1),
        endpoint(b2, "shop", "/a", [100] * 10, 0),
        endpoint(b1, "shop", "/b", [20, 20, 20, 20, 20], 0),
        endpoint(b2, "shop", "/c", [500], 1),
        endpoint(b1, "db", "SELECT", [10, 10, 10, 10], 2),
        endpoint(old, "db", "SLOW", [9000], 0),
    ]
    relations = [
        relation(b1, "User", "shop", "server", 10, 1),
        relation(b2, "User", "shop", "server", 6, 1),
        relation(b1, "shop", "db", "client", 4, 2),
        relation(b1, "shop", "db", "server", 4, 1),
        relation(b2, "shop", "redis:6379", "client", 3, 0),
    ]
    for rows in (endpoints, relations):
        assert not storage.metrics.put(
            type(rows[0]), MINUTE, [MetricsWrite(None, m, {}) for m in rows]
        ).failed
    options = storage_options(node_config.storage)

    slowest = [
        SlowEndpoint("db", 1, "SELECT", 4, 2, 10.0, 10),
        SlowEndpoint("shop", 1, "/c", 1, 1, 500.0, 500),
        SlowEndpoint("shop", 2, "/a", 20, 1, 110.5, 401),  # 400 ms, within 1%
    ]
    # Elasticsearch makes what was written searchable within its refresh interval (1 s).
    eventually(lambda: slowest_endpoints(spark, options, minutes=60, top=2) == slowest)
    assert dependencies(spark, options, minutes=60) == [
        Dependency("User", "shop", 16, 2, 0.125),
        Dependency("shop", "db", 4, 1, 0.25),
        Dependency("shop", "redis:6379", 3, 0, 0.0),
    ]


def test_error_spikes_stream_over_the_metrics_topic(
    spark: SparkSession,
    node_config: NodeConfig,
    storage: OpenStorage,
    tmp_path: Path,
) -> None:
    storage.topics.install({"metrics": 2})

    def minute(service: str, bucket: int, calls: int, errors: int) -> Entry:
        value = {"model": "service_metrics", "level": "minute", "service": service, "time_bucket": bucket,
                 "calls": calls, "errors": errors}  # fmt: skip
        return Entry(service, value, 1)

    base = 202611211200
    shop = [minute("shop", base + m, 100, e) for m, e in enumerate([1, 2, 1, 2, 1])]
    shop += [minute("shop", base + 5, 50, 15), minute("shop", base + 5, 100, 30)]  # stored again, merged
    db = [minute("db", base + m, 10, 5) for m in range(3)]
    noise = [Entry("x", {"model": "endpoint_metrics", "level": "minute"}, 1), minute("tiny", base, 2, 2)]
    publish(storage.topics, "metrics", 0, shop)
    publish(storage.topics, "metrics", 1, [*db, *noise])

    spikes: list[Spike] = []
    detector = SpikeDetector(spikes.append, threshold=0.2, factor=3.0, min_calls=10)
    query = error_spikes(
        spark, storage_options(node_config.storage), detector, str(tmp_path / "c"),
        starting_offsets="earliest",
        available_now=True,
    )  # fmt: skip
    query.awaitTermination()
    assert spikes == [
        Spike("db", base, 10, 5, 0.5, 0.0),
        Spike("shop", base + 5, 100, 30, 0.3, pytest.approx(0.014)),  # type: ignore[arg-type]
    ]
