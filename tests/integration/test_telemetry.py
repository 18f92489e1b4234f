"""Telemetry over SkyWalking's v3 protocol: segments become records and metrics
(L1 on the receiver, L2 with downsampling on the aggregator), logs become
records, meters become metrics; bad items are refused and counted."""

from __future__ import annotations

import base64
import collections
import io
import math
import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.query import print_query
from skyoap.model.metrics import CALL_METRICS, SEP, Downsampling, MeterMetrics, minute_bucket
from skyoap.model.records import LogRecord, SegmentRecord
from skyoap.proto.skywalking import common_pb2, logging_pb2, meter_pb2, tracing_pb2
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.cluster_support import metric
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect, span, stored_rows, traces, utc_minute
from tests.integration.test_cluster import storage_of


def fast_metrics(config: NodeConfig) -> NodeConfig:
    """Metrics flushed by L1 every 0.2 s and persisted every 0.5 s."""
    return config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2)


@pytest.fixture
def telemetry_config(node_config: NodeConfig) -> NodeConfig:
    return fast_metrics(node_config)


def l1_counts(node: Node, series: str) -> int:
    """``skyoap_worker_{series}_total`` summed over the L1 workers of call metrics."""
    name = f"skyoap_worker_{series}_total"
    return sum(int(node.instruments.value(name, worker=f"{m.MODEL}_l1")) for m in CALL_METRICS)


def test_known_segments_give_exact_metrics_at_every_level(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config)
    segments, expected = traces(300)
    collect(node.address, segments[:300])
    collect(node.address, segments[300:])

    for level in Downsampling:
        want = expected.rows(level)
        eventually(lambda: stored_rows(telemetry_config.storage, level) == want)  # noqa: B023
    # L1 merged the calls before they left it: one item per key and flush,
    # not one per span and scope.
    calls = sum(len(v) for v in expected.calls.values())
    assert l1_counts(node, "handed_on") * 10 < calls

    # The query command shows the same figures, over its window, for people.
    out = io.StringIO()
    storage = open_storage(telemetry_config.storage)
    try:
        print_query(storage, "services", None, 15, 10, out)
    finally:
        storage.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "services over the last 15 minutes"
    header = "service calls cpm errors sla % resp_time ms p50 p90 p99 latest minute (UTC) apdex"
    assert lines[1].split() == header.split()
    for line, name in zip(lines[3:], ("gateway", "orders"), strict=True):
        key = ("ServiceMetrics", (name,))
        (day,) = [v for k, v in expected.rows(Downsampling.DAY).items() if k[:2] == key]
        latest = str(max(k[2] for k in expected.calls if k[:2] == key))
        calls, errors = int(str(day["calls"])), int(str(day["errors"]))
        figures = [calls, f"{calls / 15:.1f}", errors, f"{int(str(day['sla'])) / 100:.2f}"]
        figures += [day["resp_time"], day["p50"], day["p90"], day["p99"]]
        apdex = f"{int(str(day['apdex'])) / 10_000:.2f}"
        assert line.split() == [name, *map(str, figures), latest[:8], f"{latest[8:10]}:{latest[10:]}", apdex]

    storage = open_storage(telemetry_config.storage)
    try:
        first, last = minute_bucket(0), utc_minute(int(time.time() * 1000) + 60_000)
        eventually(
            lambda: len(storage.records.query(SegmentRecord, first, last, limit=1000)) == 600, timeout_s=30
        )
        by_id = {r.segment_id: r for r in storage.records.query(SegmentRecord, first, last, limit=1000)}
        orders = by_id["orders-7"]
        assert (orders.trace_id, orders.service, orders.instance, orders.endpoint, orders.spans) == (
            "trace-7",
            "orders",
            "orders-1",
            "POST:/order",
            3,
        )
        source = segments[15]  # orders-7
        assert orders.start_time == min(s.startTime for s in source.spans)
        assert orders.latency_ms == max(s.endTime for s in source.spans) - orders.start_time
        assert tracing_pb2.SegmentObject.FromString(base64.b64decode(orders.data)) == source
        gateway_only = storage.records.query(
            SegmentRecord, first, last, where={"service": "gateway"}, limit=1000
        )
        assert len(gateway_only) == 300
    finally:
        storage.close()


def test_a_segment_sent_twice_is_stored_once(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config)
    segments, _ = traces(1)
    collect(node.address, segments)
    collect(node.address, segments)
    storage = open_storage(telemetry_config.storage)
    try:
        ids = lambda: sorted(r.segment_id for r in storage.records.query(SegmentRecord, 0, 999_999_999_999))  # noqa: E731
        eventually(
            lambda: (
                node.instruments.value("skyoap_worker_stored_total", worker="segment_records", op="write")
                == 4
            )
        )
        eventually(lambda: ids() == ["gw-0", "orders-0"])
    finally:
        storage.close()


def test_logs_are_stored_as_records(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    lines = [
        logging_pb2.LogData(
            timestamp=now + i,
            service="orders",
            serviceInstance="orders-1",
            endpoint="POST:/order",
            body=logging_pb2.LogDataBody(text=logging_pb2.TextLog(text=f"order {i} taken")),
            traceContext=logging_pb2.TraceContext(
                traceId=f"trace-{i}", traceSegmentId=f"orders-{i}", spanId=0
            ),
            tags=logging_pb2.LogTags(data=[common_pb2.KeyStringValuePair(key="level", value="INFO")]),
        )
        for i in range(3)
    ] + [
        logging_pb2.LogData(
            timestamp=now,
            service="orders",
            body=logging_pb2.LogDataBody(json=logging_pb2.JSONLog(json='{"k": 1}')),
        )
    ]
    with grpc.insecure_channel(node.address) as channel:
        channel.stream_unary(
            "/skywalking.v3.LogReportService/collect",
            request_serializer=logging_pb2.LogData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(iter(lines), timeout=10)
    storage = open_storage(telemetry_config.storage)
    try:
        bucket = minute_bucket(now)
        eventually(lambda: len(storage.records.query(LogRecord, bucket, bucket + 1)) == 4)
        rows = storage.records.query(LogRecord, bucket, bucket + 1)
        texts = sorted((r.content_type, r.content, r.trace_id, r.instance, dict(r.tags)) for r in rows)
        assert texts == [
            ("json", '{"k": 1}', "", "", {}),
            ("text", "order 0 taken", "trace-0", "orders-1", {"level": "INFO"}),
            ("text", "order 1 taken", "trace-1", "orders-1", {"level": "INFO"}),
            ("text", "order 2 taken", "trace-2", "orders-1", {"level": "INFO"}),
        ]
        assert sorted(r.timestamp for r in rows) == [now, now, now + 1, now + 2]
    finally:
        storage.close()


def test_meters_become_metrics(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    minute_start = now - now % 60_000

    def meters() -> Iterator[meter_pb2.MeterData]:
        for i, value in enumerate([2.0, 4.0, 9.0]):
            yield meter_pb2.MeterData(
                singleValue=meter_pb2.MeterSingleValue(
                    name="queue_size",
                    value=value,
                    labels=[
                        meter_pb2.Label(name="queue", value="q1"),
                        meter_pb2.Label(name="host", value="a"),
                    ],
                ),
                service="orders" if i == 0 else "",
                serviceInstance="orders-1" if i == 0 else "",
                timestamp=minute_start + i,
            )
        yield meter_pb2.MeterData(
            histogram=meter_pb2.MeterHistogram(
                name="latency",
                values=[
                    meter_pb2.MeterBucketValue(bucket=0, count=1, isNegativeInfinity=True),
                    meter_pb2.MeterBucketValue(bucket=0.5, count=3),
                ],
            ),
            timestamp=minute_start + 5,
        )

    with grpc.insecure_channel(node.address) as channel:
        channel.stream_unary(
            "/skywalking.v3.MeterReportService/collect",
            request_serializer=meter_pb2.MeterData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(meters(), timeout=10)
    storage = open_storage(telemetry_config.storage)
    try:
        bucket = minute_bucket(now)

        def rows() -> dict[str, MeterMetrics]:
            return {
                m.name: m for m in storage.metrics.query(MeterMetrics, Downsampling.MINUTE, bucket, bucket)
            }

        eventually(lambda: len(rows()) == 2)
        queue, latency = rows()["queue_size"], rows()["latency"]
        assert (queue.service, queue.instance, queue.labels) == ("orders", "orders-1", "host=a,queue=q1")
        assert (queue.samples, queue.value_sum, queue.last_value, queue.last_time) == (
            3,
            15.0,
            9.0,
            minute_start + 2,
        )
        assert queue.to_row()["value_avg"] == 5.0
        assert dict(latency.buckets) == {"-inf": "1", "0.5": "3"}
        assert latency.last_value == 4.0
        day = bucket // 10_000
        eventually(
            lambda: (
                sorted(
                    (m.name, m.samples)
                    for m in storage.metrics.query(MeterMetrics, Downsampling.DAY, day, day)
                )
                == [("latency", 1), ("queue_size", 3)]
            ),
        )
    finally:
        storage.close()


def refused(call: Callable[[], object]) -> str:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    return str(e.value.details())


def test_bad_segments_are_refused_counted_and_never_reach_the_metrics(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config.with_options(max_name_length=50))
    now = int(time.time() * 1000)

    def segment(sid: str, *spans: tracing_pb2.SpanObject, service: str = "shop") -> tracing_pb2.SegmentObject:
        return tracing_pb2.SegmentObject(
            traceId="t", traceSegmentId=sid, service=service, serviceInstance="shop-1", spans=spans
        )

    good = segment("good", span(0, -1, tracing_pb2.Entry, now, 20, False, operationName="GET:/"))
    near_int64_end = 2**63 - 10 - now  # two such spans summed overflow a 64-bit column
    bad = [
        ("no_spans", segment("empty")),
        ("end_before_start", segment("backwards", span(0, -1, tracing_pb2.Entry, now, -5, False))),
        ("unknown_enum", segment("odd", span(0, -1, 7, now, 5, False))),
        (
            "time_out_of_range",
            segment("old", span(0, -1, tracing_pb2.Entry, now - 30 * 365 * 86_400_000, 5, False)),
        ),
        (
            "time_out_of_range",
            segment("endless-1", span(0, -1, tracing_pb2.Entry, now, near_int64_end, False)),
        ),
        (
            "time_out_of_range",
            segment("endless-2", span(0, -1, tracing_pb2.Entry, now, near_int64_end, False)),
        ),
        ("name_too_long", segment("long", span(0, -1, tracing_pb2.Entry, now, 5, False), service="s" * 51)),
        (
            "control_character",
            segment("sep", span(0, -1, tracing_pb2.Entry, now, 5, False), service=f"shop{SEP}1"),
        ),
        (
            "control_character",
            segment("nul", span(0, -1, tracing_pb2.Entry, now, 5, False, operationName="GET:/\x00")),
        ),
    ]
    with grpc.insecure_channel(node.address) as channel:
        call = channel.stream_unary(
            "/skywalking.v3.TraceSegmentReportService/collect",
            request_serializer=tracing_pb2.SegmentObject.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        message = refused(lambda: call(iter([good, *(b for _, b in bad), good]), timeout=10))
        assert message.startswith(
            "9 segments refused (2 control_character, 1 end_before_start, 1 name_too_long, 1 no_spans, "
            "3 time_out_of_range, 1 unknown_enum; the first: segment empty has no spans); "
            "the other 2 were taken"
        ), message
        # A message that does not decode is refused, and the stream goes on.
        raw = channel.stream_unary(
            "/skywalking.v3.TraceSegmentReportService/collect",
            request_serializer=lambda b: b,
            response_deserializer=common_pb2.Commands.FromString,
        )
        message = refused(lambda: raw(iter([b"\x0a\x02\xff\xfe", good.SerializeToString()]), timeout=10))
        assert message.startswith("1 segments refused (1 undecodable;"), message
        assert message.endswith("the other 1 were taken"), message

        # A stream that breaks halfway keeps what came before the break.
        def breaking() -> Iterator[tracing_pb2.SegmentObject]:
            yield good
            # Break only once the node has it: 11 + 1 segments came in the calls above.
            eventually(
                lambda: node.instruments.value("skyoap_v3_received_total", kind="segments") == 13,
            )
            raise RuntimeError("the agent died")

        with pytest.raises(grpc.RpcError):
            call(breaking(), timeout=10)
    # Whether the node counts the break depends on which gRPC reports first, the
    # cancellation or the stream's end (tests/unit/test_agent_streams.py covers
    # both); what came before the break is kept either way, as the sums show.
    for reason, n in collections.Counter(r for r, _ in bad).items():
        assert node.instruments.value("skyoap_v3_refused_total", kind="segments", reason=reason) == n
    assert node.instruments.value("skyoap_v3_refused_total", kind="segments", reason="undecodable") == 1

    # Only the four good segments were measured.
    bucket = minute_bucket(now)
    want = {("ServiceMetrics", ("shop",), bucket): (4, 80)}
    eventually(
        lambda: (
            {
                k: (v["calls"], v["latency_sum_ms"])
                for k, v in stored_rows(telemetry_config.storage, Downsampling.MINUTE).items()
                if k[0] == "ServiceMetrics"
            }
            == want
        ),
    )


def test_bad_logs_and_meters_are_refused(
    telemetry_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(telemetry_config)
    now = int(time.time() * 1000)
    with grpc.insecure_channel(node.address) as channel:
        logs = channel.stream_unary(
            "/skywalking.v3.LogReportService/collect",
            request_serializer=logging_pb2.LogData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        message = refused(
            lambda: logs(
                iter(
                    [
                        logging_pb2.LogData(timestamp=now, service="orders"),
                        logging_pb2.LogData(timestamp=now, service=""),
                        logging_pb2.LogData(timestamp=now + 86_400_000, service="orders"),
                    ]
                ),
                timeout=10,
            )
        )
        assert message.startswith("2 logs refused (1 missing_name, 1 time_out_of_range;"), message
        meters = channel.stream_unary(
            "/skywalking.v3.MeterReportService/collect",
            request_serializer=meter_pb2.MeterData.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        message = refused(
            lambda: meters(
                iter(
                    [
                        meter_pb2.MeterData(
                            singleValue=meter_pb2.MeterSingleValue(name="x", value=1.0), timestamp=now
                        ),
                        meter_pb2.MeterData(
                            singleValue=meter_pb2.MeterSingleValue(name="x", value=math.nan),
                            service="orders",
                            serviceInstance="orders-1",
                            timestamp=now,
                        ),
                        meter_pb2.MeterData(
                            singleValue=meter_pb2.MeterSingleValue(name="x", value=2.0), timestamp=now
                        ),
                    ]
                ),
                timeout=10,
            )
        )
        assert message.startswith("2 meters refused (1 missing_name, 1 not_a_number;"), message
    assert node.instruments.value("skyoap_v3_refused_total", kind="meters", reason="not_a_number") == 1
    storage = open_storage(telemetry_config.storage)
    try:
        bucket = minute_bucket(now)
        rows = eventually(
            lambda: storage.metrics.query(MeterMetrics, Downsampling.MINUTE, bucket, bucket), timeout_s=30
        )
        assert [(m.samples, m.value_sum) for m in rows] == [(1, 2.0)]
        eventually(lambda: len(storage.records.query(LogRecord, bucket, bucket)) == 1)
    finally:
        storage.close()


@pytest.mark.parametrize("node_config", ["elasticsearch"], indirect=True)
def test_two_receivers_and_two_aggregators_store_what_one_node_stores(
    local_cluster: Callable[..., LocalCluster],
    start_node: Callable[[NodeConfig], Node],
    node_config: NodeConfig,
) -> None:
    cluster = local_cluster("--metrics-persist-interval-s", "0.5", "--metrics-l1-flush-period-s", "0.2")
    aggregators = [cluster.add("aggregator") for _ in range(2)]
    receivers = [cluster.add("receiver") for _ in range(2)]
    segments, expected = traces(300, seed=11)
    for i, receiver in enumerate(receivers):  # every other trace, both of its segments
        collect(receiver.address, [s for n, s in enumerate(segments) if n // 2 % 2 == i])

    single = start_node(fast_metrics(node_config))
    collect(single.address, segments)

    for level in Downsampling:
        want = expected.rows(level)
        eventually(lambda: stored_rows(storage_of(cluster), level) == want)  # noqa: B023
        eventually(lambda: stored_rows(node_config.storage, level) == want)  # noqa: B023
    # Both aggregators merged a share (hash by entity), and what crossed between
    # nodes is far less than the spans that were measured.
    crossed = [
        sum(metric(a, "skyoap_worker_received_total", worker=f"{m.MODEL}_l2") for m in CALL_METRICS)
        for a in aggregators
    ]
    assert all(n > 0 for n in crossed), crossed
    assert sum(crossed) * 10 < expected.spans
