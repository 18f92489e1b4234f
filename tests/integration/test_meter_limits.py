"""Meters on a real node: what no storage can keep is refused at the receiver
with a reason, or left out at L2 with the stored row kept as it was; and a
value's time is judged once, by the receiver that took it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import grpc
import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.model.metrics import Downsampling, MeterMetrics, ServiceMetrics, minute_bucket
from skyoap.proto.otlp import common_pb2 as otlp_common_pb2
from skyoap.proto.otlp import metrics_service_pb2, resource_pb2
from skyoap.proto.skywalking import common_pb2, meter_pb2, tracing_pb2
from skyoap.storage.api import MetricsWrite
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.cluster_support import metric
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect, span
from tests.integration.test_cluster import storage_of
from tests.integration.test_telemetry import fast_metrics, refused

BIG = 1e308
"""A value whose double passes the largest float (about 1.8e308)."""


@pytest.fixture
def telemetry_config(node_config: NodeConfig) -> NodeConfig:
    return fast_metrics(node_config)


def collect_meters(node: Node, meters: list[meter_pb2.MeterData]) -> None:
    """Sends ``meters`` in one MeterReportService.collect stream, the first of
    them naming the instance orders-1 of the service orders."""
    meters[0].service, meters[0].serviceInstance = "orders", "orders-1"
    with grpc.insecure_channel(node.address) as channel:
        channel.stream_unary(
            "/skywalking.v3.MeterReportService/collect",
            request_serializer=meter_pb2.MeterData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(iter(meters), timeout=10)


def single(name: str, value: float, at_ms: int) -> meter_pb2.MeterData:
    return meter_pb2.MeterData(
        singleValue=meter_pb2.MeterSingleValue(name=name, value=value), timestamp=at_ms
    )


def histogram(name: str, at_ms: int, *buckets: tuple[float, int]) -> meter_pb2.MeterData:
    """A histogram whose first bucket is from -inf, with 1 in it, then ``buckets`` (bound, count)."""
    values = [meter_pb2.MeterBucketValue(bucket=0, count=1, isNegativeInfinity=True)]
    values += [meter_pb2.MeterBucketValue(bucket=b, count=c) for b, c in buckets]
    return meter_pb2.MeterData(histogram=meter_pb2.MeterHistogram(name=name, values=values), timestamp=at_ms)


def meters_of(
    storage: OpenStorage, level: Downsampling, at_ms: int
) -> dict[str, tuple[int, float, float, dict[str, str]]]:
    """name -> (samples, sum, last value, buckets) of the meters of ``level`` holding ``at_ms``."""
    bucket = level.bucket_of(at_ms)
    return {
        m.name: (m.samples, m.value_sum, m.last_value, dict(m.buckets))
        for m in storage.metrics.query(MeterMetrics, level, bucket, bucket)
    }


@pytest.fixture
def opened(telemetry_config: NodeConfig) -> Iterator[OpenStorage]:
    storage = open_storage(telemetry_config.storage)
    yield storage
    storage.close()


def test_bad_histograms_are_refused_at_the_receiver_and_the_other_meters_stored_exactly(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node], opened: OpenStorage
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    meters = [
        single("queue_size", 2.5, now),
        histogram("negative", now, (0.5, 3), (1.0, -2)),
        histogram("nan_bound", now, (math.nan, 3)),
        histogram("inf_bound", now, (0.5, 3), (math.inf, 1)),
        histogram("bound_twice", now, (0.5, 3), (0.5, 1)),
        histogram("latency", now, (0.5, 3), (1.0, 4)),
    ]
    message = refused(lambda: collect_meters(node, meters))
    assert message == (
        "4 meters refused (2 inconsistent, 2 not_a_number; the first: meter_metrics "
        f"'orders orders-1 negative ' at {minute_bucket(now)} counts '-2' in its bucket '1.0': 0 or more); "
        "the other 2 were taken"
    )
    for reason, count in (("inconsistent", 2), ("not_a_number", 2)):
        assert node.instruments.value("skyoap_v3_refused_total", kind="meters", reason=reason) == count
    want = {
        "queue_size": (1, 2.5, 2.5, {}),
        "latency": (1, 8.0, 8.0, {"-inf": "1", "0.5": "3", "1.0": "4"}),
    }
    for level in Downsampling:
        eventually(lambda: meters_of(opened, level, now) == want)  # noqa: B023


def test_a_value_whose_sum_with_others_of_its_call_would_overflow_is_refused(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node], opened: OpenStorage
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    message = refused(lambda: collect_meters(node, [single("big", BIG, now), single("big", BIG, now)]))
    assert message == (
        "1 meters refused (1 overflow; the first: meter_metrics 'orders orders-1 big ' at "
        f"{minute_bucket(now)}: its sum 1e+308 added to the 1e+308 of the others would pass the largest "
        "number a float holds); the other 1 were taken"
    )
    assert node.instruments.value("skyoap_v3_refused_total", kind="meters", reason="overflow") == 1
    for level in Downsampling:
        eventually(lambda: meters_of(opened, level, now) == {"big": (1, BIG, BIG, {})})  # noqa: B023


def test_a_value_whose_sum_with_the_stored_row_would_overflow_leaves_the_row_as_it_was(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node], opened: OpenStorage
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    collect_meters(node, [single("big", BIG, now)])
    for level in Downsampling:
        eventually(lambda: meters_of(opened, level, now) == {"big": (1, BIG, BIG, {})})  # noqa: B023

    # Only L2 sees this sum, with the stored row: left out at each level, counted.
    collect_meters(node, [single("big", BIG, now + 1)])
    dropped = {"worker": "meter_metrics_l2", "reason": "overflow"}
    eventually(lambda: node.instruments.value("skyoap_worker_dropped_total", **dropped) == 3)
    for level in Downsampling:
        assert meters_of(opened, level, now) == {"big": (1, BIG, BIG, {})}

    # A value that fits is added to the row as ever.
    collect_meters(node, [single("big", -BIG / 2, now + 2)])
    for level in Downsampling:
        eventually(lambda: meters_of(opened, level, now) == {"big": (2, BIG / 2, -BIG / 2, {})})  # noqa: B023
    assert node.instruments.value("skyoap_worker_dropped_total", **dropped) == 3


def test_an_otlp_data_point_whose_sum_would_overflow_is_a_partial_success(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node], opened: OpenStorage
) -> None:
    node = start_node(telemetry_config)
    now = time.time_ns()
    names = [
        otlp_common_pb2.KeyValue(key=k, value=otlp_common_pb2.AnyValue(string_value=v))
        for k, v in (("service.name", "web"), ("service.instance.id", "web-1"))
    ]
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    scope = request.resource_metrics.add(resource=resource_pb2.Resource(attributes=names)).scope_metrics.add()
    big = scope.metrics.add(name="big").gauge.data_points
    for i in range(2):
        big.add(time_unix_nano=now + i, as_double=BIG)
    scope.metrics.add(name="small").gauge.data_points.add(time_unix_nano=now, as_double=2.0)
    with grpc.insecure_channel(node.address) as channel:
        answer = channel.unary_unary(
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            request_serializer=metrics_service_pb2.ExportMetricsServiceRequest.SerializeToString,
            response_deserializer=metrics_service_pb2.ExportMetricsServiceResponse.FromString,
        )(request, timeout=10)
    assert answer.partial_success.rejected_data_points == 1
    assert answer.partial_success.error_message == (
        f"meter_metrics 'web web-1 big ' at {minute_bucket(now // 1_000_000)}: its sum 1e+308 added to the "
        "1e+308 of the others would pass the largest number a float holds"
    )
    assert node.instruments.value("skyoap_v3_refused_total", kind="otlp_data_points", reason="overflow") == 1
    now_ms = now // 1_000_000
    want: dict[str, tuple[int, float, float, dict[str, str]]] = {
        "big": (1, BIG, BIG, {}),
        "small": (1, 2.0, 2.0, {}),
    }
    eventually(lambda: meters_of(opened, Downsampling.MINUTE, now_ms) == want)


def test_storage_refuses_a_row_holding_a_number_that_is_not_finite(storage: OpenStorage) -> None:
    storage.metrics.install([MeterMetrics])
    now = int(time.time() * 1000)
    row = MeterMetrics(
        time_bucket=minute_bucket(now), service="orders", instance="orders-1", name="big", labels="",
        samples=1, value_sum=BIG, last_value=BIG, last_time=now,
    )  # fmt: skip
    minute = Downsampling.MINUTE
    assert storage.metrics.put(MeterMetrics, minute, [MetricsWrite(None, row, {"w": 1})]).failed == {}
    stored = storage.metrics.get_many(MeterMetrics, minute, [row.key()])[row.key()]
    for bad in (math.inf, math.nan):
        value = replace(row, samples=2, value_sum=bad)
        outcome = storage.metrics.put(MeterMetrics, minute, [MetricsWrite(stored, value, {"w": 2})])
        assert outcome.failed == {
            row.key(): f"value_sum is {bad}: no storage keeps a number that is not finite"
        }
    assert storage.metrics.get_many(MeterMetrics, minute, [row.key()])[row.key()].item == row


def test_a_segment_the_receiver_took_is_measured_whatever_the_aggregators_clock_says(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    """The aggregator judges times by a window of a minute, as a clock ten
    minutes ahead of the receiver's would; the receiver's window takes the
    segment, and its metrics are stored."""
    cluster = local_cluster("--metrics-persist-interval-s", "0.5", "--metrics-l1-flush-period-s", "0.2")
    aggregator = cluster.add("aggregator", "--telemetry-max-age-s", "60")
    receiver = cluster.add("receiver")
    start = int(time.time() * 1000) - 10 * 60_000
    segment = tracing_pb2.SegmentObject(
        traceId="trace-old", traceSegmentId="segment-old", service="orders", serviceInstance="orders-1",
        spans=[span(0, -1, 0, start, 20, False, operationName="GET:/orders")],
    )  # fmt: skip
    collect(receiver.address, [segment])
    storage = open_storage(storage_of(cluster))
    try:
        bucket = minute_bucket(start)

        def calls() -> list[tuple[str, int]]:
            return [
                (m.service, m.calls)
                for m in storage.metrics.query(ServiceMetrics, Downsampling.MINUTE, bucket, bucket)
            ]

        eventually(lambda: calls() == [("orders", 1)])
        assert metric(aggregator, "skyoap_remote_service_rejected_total") == 0
    finally:
        storage.close()
