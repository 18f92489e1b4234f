"""Bad input gets a clear status, nothing stored changes, the node keeps serving."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from skyoap.agent import Agent
from skyoap.model.inventory import INVENTORY_TYPES, EndpointInventory, ServiceInventory
from skyoap.proto import common_pb2, register_pb2, register_pb2_grpc
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import stored

MAX_NAME = 40


@pytest.fixture
def node(node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]) -> Node:
    config = node_config.with_options(max_name_length=MAX_NAME, max_batch_items=10, max_message_bytes=64_000)
    return start_node(config)


@pytest.fixture
def channel(node: Node) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(node.address, options=[("grpc.max_send_message_length", 1 << 24)]) as ch:
        yield ch


def snapshot(config: NodeConfig) -> dict[str, list[object]]:
    return {m.MODEL: stored(config.storage, m) for m in INVENTORY_TYPES}  # type: ignore[misc]


def raw_call(channel: grpc.Channel, method: str, body: bytes) -> None:
    channel.unary_unary(f"/skyoap.v1.Register/{method}")(body, timeout=10)


def service(name: str) -> register_pb2.Services:
    return register_pb2.Services(services=[register_pb2.Service(serviceName=name)])


def test_bad_registrations_get_clear_statuses_and_change_nothing(node: Node, channel: grpc.Channel) -> None:
    agent = Agent(node.address, "orders", instance_uuid="orders-1", retry_interval_s=0.05)
    ids = agent.register()
    agent.register_endpoints(["GET:/orders"])
    agent.register_addresses(["db:5432"])
    before = snapshot(node.config)

    stub = register_pb2_grpc.RegisterStub(channel)
    bad_utf8 = bytearray(service("ab").SerializeToString())
    bad_utf8[-2:] = b"\xff\xfe"
    cases: list[tuple[Callable[[], object], grpc.StatusCode, str]] = [
        (
            lambda: stub.doServiceRegister(service("")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "service name #0 is empty",
        ),
        (
            lambda: stub.doServiceRegister(
                register_pb2.Services(
                    services=[
                        register_pb2.Service(serviceName="fine"),
                        register_pb2.Service(serviceName="x" * 41),
                    ]
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "service name #1 has 41 characters; at most 40 are allowed",
        ),
        (
            lambda: stub.doServiceRegister(service("shop\x1fcart")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "service name #0 'shop\\x1fcart' holds the control character '\\x1f' at 4",
        ),
        (
            lambda: raw_call(channel, "doServiceRegister", bytes(bad_utf8)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the request is not a valid skyoap.v1.Services message (String field had bad UTF-8)",
        ),
        (
            lambda: raw_call(channel, "doServiceRegister", b"\xff\xff\xff\xff"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the request is not a valid skyoap.v1.Services message (Wire format was corrupt)",
        ),
        (
            lambda: stub.doServiceInstanceRegister(
                register_pb2.ServiceInstances(
                    instances=[register_pb2.ServiceInstance(serviceId=77, instanceUUID="u-77")]
                )
            ),
            grpc.StatusCode.NOT_FOUND,
            "service instance #0 names service id 77, which is not registered",
        ),
        (
            lambda: stub.doEndpointRegister(
                register_pb2.Endpoints(endpoints=[register_pb2.Endpoint(serviceId=0, endpointName="GET:/x")])
            ),
            grpc.StatusCode.NOT_FOUND,
            "endpoint #0 names service id 0, which is not registered",
        ),
        (
            lambda: stub.doEndpointRegister(
                register_pb2.Endpoints(
                    endpoints=[
                        register_pb2.Endpoint(serviceId=ids.service_id, endpointName="GET:/x", **{"from": 7})
                    ]
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "endpoint #0 has detect point 7; it must be 0, 1 or 2",
        ),
        (
            lambda: stub.doNetworkAddressRegister(
                register_pb2.NetAddresses(addresses=[f"h{i}:1" for i in range(11)])
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "the call carries 11 items (network address); at most 10 are allowed per call, split the batch",
        ),
        (
            lambda: stub.doServiceRegister(
                register_pb2.Services(
                    services=[
                        register_pb2.Service(
                            serviceName="heavy",
                            properties=[common_pb2.KeyStringValuePair(key="k", value="v" * 20_000)],
                        )
                    ]
                )
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "'heavy' carries 20001 characters of tags and properties; at most 16384 are allowed",
        ),
        (
            lambda: stub.doNetworkAddressRegister(register_pb2.NetAddresses(addresses=["a" * 70_000])),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "Received message larger than max",
        ),
    ]
    for call, code, message in cases:
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() is code, info.value.details()
        assert message in info.value.details()

    time.sleep(0.5)  # anything wrongly handed to the chain would be stored by now
    assert snapshot(node.config) == before
    # The node keeps serving.
    assert Agent(node.address, "billing", retry_interval_s=0.05, channel=channel).register().service_id == 2
    agent.close()


def test_names_too_long_for_a_storage_id_are_registered(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    """Elasticsearch ids hold 512 bytes; 200 Chinese characters take 600."""
    node = start_node(node_config)
    service, endpoint = "订单服务" * 50, "/下单" * 100
    agent = Agent(node.address, service, instance_uuid="实例" * 100, retry_interval_s=0.05)
    ids = agent.register()
    endpoint_ids = agent.register_endpoints([endpoint])
    assert (ids.service_id, ids.instance_id) == (1, 1)
    assert list(endpoint_ids.values()) == [1]
    (stored_service,) = stored(node.config.storage, ServiceInventory)
    (stored_endpoint,) = stored(node.config.storage, EndpointInventory)
    assert (stored_service.name, stored_endpoint.name) == (service, endpoint)
    agent.close()
