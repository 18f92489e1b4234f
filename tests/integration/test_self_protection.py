"""A node keeps answering whatever its clients do: idle streams hold at most
``--max-concurrent-calls`` of its threads and only until ``--stream-idle-s``
passes, calls past the bound are refused at once, and health checks are never
counted (a real node, its gRPC server on a free port)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agent import Agent
from edge.auth import SendingToken
from model.inventory import ServiceInventory
from proto.skywalking import common_pb2
from tests.integration.helpers import eventually, stored
from wiring.config import NodeConfig
from wiring.node import Node

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
        host="127.0.0.1", port=0, embedded_path=str(tmp_path / "skyoap.db"), **options
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
        eventually(lambda: limits.calls == 10, timeout_s=10)
        with pytest.raises(grpc.RpcError) as refused:
            Agent(node.address, "orders").register(timeout_s=5)
        assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.details() == "the node serves at most 10 calls at once; try again later"
        assert health(node.address) == health_pb2.HealthCheckResponse.SERVING

        # A second of silence closes each idle stream, and the node takes calls again.
        for call in streams.calls:
            with pytest.raises(grpc.RpcError) as closed:
                call.result(timeout=10)
            assert closed.value.code() is grpc.StatusCode.CANCELLED
        assert limits.calls == 0
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
