"""A node keeps answering whatever its clients do: idle streams hold at most
``--max-concurrent-calls`` of its threads and only until ``--stream-idle-s``
passes, calls past the bound are refused at once, and health checks are never
counted (a real node, its gRPC server on a free port)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skyoap.agent import Agent
from skyoap.edge.auth import SendingToken
from skyoap.model.inventory import ServiceInventory
from skyoap.model.records import LogRecord, SegmentRecord
from skyoap.proto import register_pb2, register_pb2_grpc
from skyoap.proto.skywalking import common_pb2, logging_pb2, meter_pb2, tracing_pb2
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, stored
from tests.integration.telemetry_data import span

COLLECT = "/skywalking.v3.TraceSegmentReportService/collect"


class IdleStreams:
    """``count`` client streams of segments that send nothing until released."""

    def __init__(self, address: str, count: int, per_channel: int = 10) -> None:
        self._released = threading.Event()
        self._channels = [grpc.insecure_channel(address) for _ in range(-(-count // per_channel))]
        self.calls = [
            self._channels[i // per_channel]
            .stream_unary(
                COLLECT, request_serializer=bytes, response_deserializer=common_pb2.Commands.FromString
            )
            .future(self._nothing(), timeout=120)
            for i in range(count)
        ]

    def _nothing(self) -> Iterator[bytes]:
        self._released.wait(120)
        yield from ()

    def close(self) -> None:
        self._released.set()
        for call in self.calls:
            call.cancel()
        for channel in self._channels:
            channel.close()


def node_with(tmp_path: Path, **options: object) -> Node:
    config = NodeConfig().with_options(
        host="127.0.0.1", port=0, query_port=0, embedded_path=str(tmp_path / "skyoap.db"), **options
    )
    return Node(config).start()


def health(address: str) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
    with grpc.insecure_channel(address) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status


def test_a_hundred_idle_streams_leave_health_checks_and_agent_calls_answering(tmp_path: Path) -> None:
    node = node_with(tmp_path)
    streams = IdleStreams(node.address, 100)
    try:
        assert node.server is not None
        limits = node.server.limits
        eventually(lambda: limits.calls == 100)
        assert health(node.address) == health_pb2.HealthCheckResponse.SERVING
        ids = Agent(node.address, "orders", retry_interval_s=0.05).register(timeout_s=30)
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert all(not call.done() for call in streams.calls)
    finally:
        streams.close()
        node.close(5)


def test_calls_past_the_bound_are_refused_and_idle_streams_are_closed(tmp_path: Path) -> None:
    node = node_with(tmp_path, max_concurrent_calls=10, stream_idle_s=1.0)
    streams = IdleStreams(node.address, 10)
    try:
        assert node.server is not None
        limits = node.server.limits
        eventually(lambda: limits.calls == 10)
        with grpc.insecure_channel(node.address) as channel, pytest.raises(grpc.RpcError) as refused:
            register_pb2_grpc.RegisterStub(channel).doServiceRegister(register_pb2.Services(), timeout=5)
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.details() == "the node serves at most 10 calls at once; try again later"
        assert health(node.address) == health_pb2.HealthCheckResponse.SERVING

        # A second of silence closes each idle stream, and the node takes calls again.
        for call in streams.calls:
            with pytest.raises(grpc.RpcError) as closed:
                call.result(timeout=10)
            assert closed.value.code() is grpc.StatusCode.CANCELLED
        # Each handler leaves the count as it returns, just after the client hears.
        eventually(lambda: limits.calls == 0)
        ids = Agent(node.address, "orders", retry_interval_s=0.05).register(timeout_s=30)
        assert (ids.service_id, ids.instance_id) == (1, 1)
    finally:
        streams.close()
        node.close(5)


def test_the_admin_port_is_bound_to_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    node = node_with(tmp_path, admin_port=0)
    try:
        assert node.admin_host == "127.0.0.1"
    finally:
        node.close(5)
    node = node_with(tmp_path, admin_port=0, admin_host="0.0.0.0")
    try:
        assert node.admin_host == "0.0.0.0"
    finally:
        node.close(5)


def test_with_an_agent_token_only_calls_that_carry_it_are_served(tmp_path: Path) -> None:
    node = node_with(tmp_path, auth_token="s3cret")
    try:
        for channel, details in [
            (
                grpc.insecure_channel(node.address),
                "this node requires an agent token: send it as the gRPC metadata 'authentication' "
                "(SkyWalking's agents: SW_AGENT_AUTHENTICATION)",
            ),
            (
                grpc.intercept_channel(grpc.insecure_channel(node.address), SendingToken("guess")),
                "the agent token is not the one this node requires",
            ),
        ]:
            with pytest.raises(grpc.RpcError) as refused:
                Agent(node.address, "orders", channel=channel).register(timeout_s=5)
            assert (refused.value.code(), refused.value.details()) == (
                grpc.StatusCode.UNAUTHENTICATED,
                details,
            )
            channel.close()
        assert health(node.address) == health_pb2.HealthCheckResponse.SERVING
        assert stored(node.config.storage, ServiceInventory) == []

        with grpc.intercept_channel(grpc.insecure_channel(node.address), SendingToken("s3cret")) as channel:
            agent = Agent(node.address, "orders", retry_interval_s=0.05, channel=channel)
            ids = agent.register(timeout_s=30)
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert [s.name for s in stored(node.config.storage, ServiceInventory)] == ["orders"]
    finally:
        node.close(5)


def test_what_one_item_may_carry_is_bounded_and_the_rest_of_the_call_is_taken(tmp_path: Path) -> None:
    node = node_with(
        tmp_path,
        max_spans_per_segment=2,
        max_refs_per_span=1,
        max_tags_per_item=2,
        max_log_body_bytes=100,
        max_histogram_buckets=3,
    )
    now = int(time.time() * 1000)

    def segment(sid: str, *spans: tracing_pb2.SpanObject) -> tracing_pb2.SegmentObject:
        return tracing_pb2.SegmentObject(
            traceId="t", traceSegmentId=sid, service="shop", serviceInstance="shop-1", spans=spans
        )

    def entry(**fields: object) -> tracing_pb2.SpanObject:
        return span(0, -1, tracing_pb2.Entry, now, 5, False, operationName="GET:/", **fields)

    ref = tracing_pb2.SegmentReference(parentService="web", parentTraceSegmentId="p", traceId="t")
    tag = common_pb2.KeyStringValuePair(key="k", value="v")
    text = logging_pb2.LogDataBody(text=logging_pb2.TextLog(text="x" * 200))
    histogram = meter_pb2.MeterHistogram(
        name="h", values=[meter_pb2.MeterBucketValue(bucket=b, count=1) for b in range(4)]
    )
    try:
        with grpc.insecure_channel(node.address) as channel:
            segments = call_of(channel, "TraceSegmentReportService", tracing_pb2.SegmentObject)
            message = refused(
                lambda: segments(
                    iter(
                        [
                            segment("long", entry(), entry(), entry()),
                            segment("refs", entry(refs=[ref, ref])),
                            segment("tags", entry(tags=[tag, tag, tag])),
                            segment("good", entry(refs=[ref], tags=[tag, tag])),
                        ]
                    ),
                    timeout=10,
                )
            )
            assert message == (
                "3 segments refused (3 over_limit; the first: spans of segment long: 3, more than the 2 "
                "allowed (--max-spans-per-segment)); the other 1 were taken"
            )
            logs = call_of(channel, "LogReportService", logging_pb2.LogData)
            message = refused(
                lambda: logs(
                    iter(
                        [
                            logging_pb2.LogData(timestamp=now, service="shop", body=text),
                            logging_pb2.LogData(
                                timestamp=now, service="shop", tags=logging_pb2.LogTags(data=[tag, tag, tag])
                            ),
                            logging_pb2.LogData(timestamp=now, service="shop"),
                        ]
                    ),
                    timeout=10,
                )
            )
            assert message == (
                "2 logs refused (2 over_limit; the first: bytes of a log body: 206, more than the 100 "
                "allowed (--max-log-body-bytes)); the other 1 were taken"
            )
            meters = call_of(channel, "MeterReportService", meter_pb2.MeterData)
            message = refused(
                lambda: meters(
                    iter(
                        [meter_pb2.MeterData(histogram=histogram, service="shop", serviceInstance="shop-1")]
                    ),
                    timeout=10,
                )
            )
            assert message == (
                "1 meters refused (1 over_limit; the first: buckets of meter h: 4, more than the 3 "
                "allowed (--max-histogram-buckets)); the other 0 were taken"
            )
        for kind, n in (("segments", 3), ("logs", 2), ("meters", 1)):
            assert node.instruments.value("skyoap_v3_refused_total", kind=kind, reason="over_limit") == n
        storage = open_storage(node.config.storage)
        try:
            everything = (0, 999_999_999_999)
            eventually(lambda: len(storage.records.query(SegmentRecord, *everything)) == 1)
            eventually(lambda: len(storage.records.query(LogRecord, *everything)) == 1)
            assert [s.segment_id for s in storage.records.query(SegmentRecord, *everything)] == ["good"]
        finally:
            storage.close()
    finally:
        node.close()


def call_of(channel: grpc.Channel, service: str, message: Any) -> grpc.StreamUnaryMultiCallable:
    return channel.stream_unary(
        f"/skywalking.v3.{service}/collect",
        request_serializer=message.SerializeToString,
        response_deserializer=common_pb2.Commands.FromString,
    )


def refused(call: Callable[[], object]) -> str:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    return str(e.value.details())
