"""OpenTelemetry's protocol: a program instrumented with OpenTelemetry's own
SDK and OTLP exporter (``otel_app.py``, run in ``.venv-otel``) reports to a
node unchanged, and what it did is found by ``skyoap query`` and in Spark."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from skyoap.analytics.jobs import Dependency, dependencies
from skyoap.deploy.query import print_query
from skyoap.edge.auth import SendingToken
from skyoap.model.metrics import (
    SEP,
    Downsampling,
    EndpointMetrics,
    EndpointRelationMetrics,
    MeterMetrics,
    ServiceInstanceRelationMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
)
from skyoap.model.records import LogRecord, SegmentRecord
from skyoap.proto.otlp import (
    common_pb2,
    logs_service_pb2,
    metrics_service_pb2,
    resource_pb2,
    trace_pb2,
    trace_service_pb2,
)
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, storage_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
OTEL_PYTHON = ROOT / ".venv-otel" / "bin" / "python"
EVERYTHING = (0, 999_999_999_999)


def run_app(node: Node, token: str = "") -> dict[str, Any]:
    assert OTEL_PYTHON.exists(), "run deploy/install.sh: it installs OpenTelemetry's SDK in .venv-otel"
    # Spans leave at the app's flushes only (the callee's first), not on the
    # SDK's 5 s timer: the callee's server spans teach the address the caller
    # used before the caller's client spans are measured.
    env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "600000"}
    run = subprocess.run(
        [str(OTEL_PYTHON), str(Path(__file__).with_name("otel_app.py")), "--endpoint", node.address,
         "--token", token],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-6000:]
    result: dict[str, Any] = json.loads(run.stdout.splitlines()[-1])
    return result


def calls(storage: OpenStorage) -> dict[str, tuple[int, int]]:
    out = {}
    for model in (ServiceMetrics, EndpointMetrics, ServiceRelationMetrics, ServiceInstanceRelationMetrics,
                  EndpointRelationMetrics):  # fmt: skip
        for m in storage.metrics.query(model, Downsampling.DAY, *EVERYTHING):
            out[f"{model.MODEL}: {m.entity().replace(SEP, ' ')}"] = (m.calls, m.errors)
    return out


def test_a_program_instrumented_with_opentelemetry_reports_unchanged(
    node_config: NodeConfig,
    start_node: Callable[[NodeConfig], Node],
    storage: OpenStorage,
    spark: SparkSession,
) -> None:
    """Six checkouts of ``shop`` call ``orders`` over HTTP; orders 3 and 6 fail."""
    node = start_node(node_config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2))
    app = run_app(node)
    want = {
        "service_metrics: shop": (6, 0),
        "service_metrics: orders": (6, 2),
        "endpoint_metrics: shop GET /checkout": (6, 0),
        "endpoint_metrics: orders GET /orders/{id}": (6, 2),
        "service_relation_metrics: User shop server": (6, 0),
        "service_instance_relation_metrics: User User shop shop-1": (6, 0),
        "endpoint_relation_metrics: User User shop GET /checkout": (6, 0),
        # The callee's side: found from each orders span's parent, a span of shop.
        "service_relation_metrics: shop orders server": (6, 2),
        "service_instance_relation_metrics: shop shop-1 orders orders-1": (6, 2),
        # The caller's side: the orders spans' server.address and server.port
        # are the address shop called, an alias of orders and orders-1.
        "service_relation_metrics: shop orders client": (6, 2),
        "service_instance_relation_metrics: shop shop-1 orders orders-1 client": (6, 2),
        "endpoint_relation_metrics: shop GET /checkout orders GET /orders/{id}": (6, 2),
    }
    eventually(lambda: calls(storage) == want)

    # A trace is found by its id: one segment of each service.
    assert len(app["traces"]) == 6
    for trace_id in app["traces"]:
        segments = storage.records.query(SegmentRecord, *EVERYTHING, {"trace_id": trace_id})
        assert sorted((s.service, s.instance, s.endpoint, s.spans) for s in segments) == [
            ("orders", "orders-1", "GET /orders/{id}", 1),
            ("shop", "shop-1", "GET /checkout", 2),
        ]

    # Its logs, with their trace ids and levels.
    logs = eventually(lambda: storage.records.query(LogRecord, *EVERYTHING))
    assert sorted((r.service, r.content) for r in logs) == [
        ("orders", f"order {n} answered {500 if n % 3 == 0 else 200}") for n in range(1, 7)
    ]
    assert sorted(r.trace_id for r in logs) == sorted(app["traces"])
    assert {r.tags["level"] for r in logs} == {"INFO"}

    # Its metrics: a sum per outcome, and a histogram of amounts (7.5 each order's number).
    meters = {
        (m.name, m.labels): m
        for m in eventually(lambda: storage.metrics.query(MeterMetrics, Downsampling.DAY, *EVERYTHING), 30)
    }
    assert {k: m.last_value for k, m in meters.items() if k[0] == "orders.served"} == {
        ("orders.served", "outcome=error"): 2.0,
        ("orders.served", "outcome=ok"): 4.0,
    }
    assert dict(meters[("order.amount", "")].buckets) == {"-inf": "1", "10.0": "5", "100.0": "0"}

    # skyoap query and Spark see the same calls.
    out = io.StringIO()
    print_query(storage, "relations", None, 15, 10, out)
    rows = [line.split()[:4] for line in out.getvalue().splitlines()[2:]]
    assert ["shop", "orders", "server", "6"] in rows
    assert ["User", "shop", "server", "6"] in rows
    assert ["shop", "orders", "client", "6"] in rows
    for what, want_rows in (
        ("instance-relations", [["shop", "shop-1", "orders", "orders-1", "server", "6", "0.4", "2"],
                                ["shop", "shop-1", "orders", "orders-1", "client", "6", "0.4", "2"]]),
        ("endpoint-relations", [["shop", "GET /checkout", "orders", "GET /orders/{id}", "6", "0.4", "2"]]),
    ):  # fmt: skip
        out = io.StringIO()
        print_query(storage, what, "shop", 15, 10, out)
        # Columns are apart by two spaces at least; names hold single ones.
        lines = out.getvalue().splitlines()[3:]
        assert [re.split(r"\s{2,}", line)[: len(want_rows[0])] for line in lines] == want_rows
    # Both sides of shop -> orders are one edge.
    assert dependencies(spark, storage_options(node_config.storage), minutes=60) == [
        Dependency("User", "shop", 6, 0, 0.0),
        Dependency("shop", "orders", 6, 2, 2 / 6),
    ]


def export(node: Node, request: trace_service_pb2.ExportTraceServiceRequest, token: str = "") -> Any:
    channel = grpc.insecure_channel(node.address)
    if token:
        channel = grpc.intercept_channel(channel, SendingToken(token))
    with channel:
        call = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=trace_service_pb2.ExportTraceServiceRequest.SerializeToString,
            response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString,
        )
        return call(request, timeout=10)


def server_span(trace_id: bytes, span_id: bytes, name: str, start_ns: int, end_ns: int) -> trace_pb2.Span:
    return trace_pb2.Span(
        trace_id=trace_id, span_id=span_id, name=name, kind=trace_pb2.Span.SPAN_KIND_SERVER,
        start_time_unix_nano=start_ns, end_time_unix_nano=end_ns,
    )  # fmt: skip


def spans_of(service: str, *spans: trace_pb2.Span) -> trace_service_pb2.ExportTraceServiceRequest:
    name = common_pb2.KeyValue(key="service.name", value=common_pb2.AnyValue(string_value=service))
    request = trace_service_pb2.ExportTraceServiceRequest()
    rs = request.resource_spans.add(resource=resource_pb2.Resource(attributes=[name] if service else []))
    rs.scope_spans.add(spans=spans)
    return request


def test_refused_spans_are_answered_as_a_partial_success_and_the_rest_is_stored(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], storage: OpenStorage
) -> None:
    node = start_node(node_config)
    now = time.time_ns()
    good = server_span(b"t" * 16, b"s" * 8, "GET /a", now, now + 5_000_000)
    short_id = server_span(b"t" * 15, b"x" * 8, "GET /b", now, now)
    backwards = server_span(b"u" * 16, b"y" * 8, "GET /c", now, now - 1_000_000)
    answer = export(node, spans_of("web", good, short_id, backwards))
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == (
        "span 'GET /b' has a trace id of 15 bytes and a span id of 8: OTLP's are 16 and 8"
    )
    # A resource without a service name: all its spans are refused.
    answer = export(node, spans_of("", good))
    assert answer.partial_success.rejected_spans == 1
    assert "service.name" in answer.partial_success.error_message
    (segment,) = eventually(lambda: storage.records.query(SegmentRecord, *EVERYTHING))
    assert (segment.trace_id, segment.service, segment.endpoint, segment.latency_ms) == (
        (b"t" * 16).hex(), "web", "GET /a", 5,
    )  # fmt: skip


def test_with_an_agent_token_an_export_without_it_is_refused(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], storage: OpenStorage
) -> None:
    node = start_node(node_config.with_options(auth_token="s3cret"))
    now = time.time_ns()
    span = server_span(b"t" * 16, b"s" * 8, "GET /a", now, now)
    for token in ("", "guess"):
        with pytest.raises(grpc.RpcError) as refused:
            export(node, spans_of("web", span), token)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert export(node, spans_of("web", span), "s3cret").partial_success.rejected_spans == 0
    eventually(lambda: len(storage.records.query(SegmentRecord, *EVERYTHING)) == 1)


def test_refused_data_points_and_log_records_are_answered_as_a_partial_success(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], storage: OpenStorage
) -> None:
    node = start_node(node_config)
    now = time.time_ns()
    name = common_pb2.KeyValue(key="service.name", value=common_pb2.AnyValue(string_value="web"))
    resource = resource_pb2.Resource(attributes=[name])
    metrics = metrics_service_pb2.ExportMetricsServiceRequest()
    scope = metrics.resource_metrics.add(resource=resource).scope_metrics.add()
    scope.metrics.add(name="queue.depth").gauge.data_points.add(time_unix_nano=now, as_int=7)
    scope.metrics.add(name="no.value").gauge.data_points.add(time_unix_nano=now)
    scope.metrics.add(name="latency").exponential_histogram.data_points.add(time_unix_nano=now, count=1)
    bad = scope.metrics.add(name="sizes").histogram.data_points.add(time_unix_nano=now)
    bad.bucket_counts.extend([1, 2])
    bad.explicit_bounds.extend([1.0, 2.0])
    logs = logs_service_pb2.ExportLogsServiceRequest()
    records = logs.resource_logs.add(resource=resource).scope_logs.add().log_records
    records.add(time_unix_nano=now, body=common_pb2.AnyValue(string_value="kept"), trace_id=b"t" * 16)
    records.add(time_unix_nano=now, body=common_pb2.AnyValue(string_value="refused"), trace_id=b"t" * 3)
    with grpc.insecure_channel(node.address) as channel:
        answer = channel.unary_unary(
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            request_serializer=metrics_service_pb2.ExportMetricsServiceRequest.SerializeToString,
            response_deserializer=metrics_service_pb2.ExportMetricsServiceResponse.FromString,
        )(metrics, timeout=10)
        assert answer.partial_success.rejected_data_points == 3
        assert answer.partial_success.error_message == "a data point of meter no.value has no value"
        answer = channel.unary_unary(
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
            request_serializer=logs_service_pb2.ExportLogsServiceRequest.SerializeToString,
            response_deserializer=logs_service_pb2.ExportLogsServiceResponse.FromString,
        )(logs, timeout=10)
        assert answer.partial_success.rejected_log_records == 1
        assert answer.partial_success.error_message == (
            "a log record has a trace id of 3 bytes and a span id of 0: OTLP's are 16 and 8 (or none)"
        )
    (meter,) = eventually(lambda: storage.metrics.query(MeterMetrics, Downsampling.MINUTE, *EVERYTHING), 30)
    assert (meter.service, meter.name, meter.last_value) == ("web", "queue.depth", 7.0)
    (line,) = eventually(lambda: storage.records.query(LogRecord, *EVERYTHING))
    assert (line.service, line.content, line.trace_id) == ("web", "kept", (b"t" * 16).hex())
