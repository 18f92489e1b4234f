"""Heartbeats: they keep an instance active, their absence expires it, and a
ping for an id nobody registered tells the agent to register again."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from skyoap.agent import Agent
from skyoap.model.inventory import ServiceInstanceInventory, ServiceInventory
from skyoap.proto import ping_pb2, ping_pb2_grpc
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, stored


def instance_rows(config: NodeConfig) -> dict[str, ServiceInstanceInventory]:
    return {i.instance_uuid: i for i in stored(config.storage, ServiceInstanceInventory)}


def test_an_instance_without_heartbeats_expires_and_a_ping_revives_it(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    config = node_config.with_options(heartbeat_expiry_s=1.5, housekeeping_interval_s=0.3)
    node = start_node(config)
    beating = Agent(node.address, "shop", instance_uuid="beating", retry_interval_s=0.05)
    silent = Agent(node.address, "shop", instance_uuid="silent", retry_interval_s=0.05)
    beating.register()
    silent.register()
    beating.start_heartbeat(0.2)
    try:
        eventually(lambda: not instance_rows(config)["silent"].active)
        rows = instance_rows(config)
        assert rows["beating"].active is True
        assert rows["beating"].heartbeat_time > rows["beating"].register_time
        assert silent.ping() is True  # still registered: no command to register again
        eventually(lambda: instance_rows(config)["silent"].active)
        rows = instance_rows(config)
        assert rows["silent"].sequence == silent.ids.instance_id
    finally:
        beating.close()
        silent.close()
    # The service's heartbeat moved with its instances'.
    (service,) = stored(config.storage, ServiceInventory)
    assert service.heartbeat_time >= rows["silent"].heartbeat_time - 1


def test_a_ping_for_an_unknown_instance_gets_the_reregister_command(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    with grpc.insecure_channel(node.address) as channel:
        stub = ping_pb2_grpc.ServiceInstancePingStub(channel)
        answer = stub.doPing(
            ping_pb2.ServiceInstancePingPkg(serviceInstanceId=4242, time=1, serviceInstanceUUID="x")
        )
    assert [c.command for c in answer.commands] == ["ServiceMetadataReset"]
    args = {kv.key: kv.value for kv in answer.commands[0].args}
    assert args["Reason"] == "service instance id 4242 is not registered"

    # The reference agent obeys it: forgets its ids and registers again.
    agent = Agent(node.address, "pay", instance_uuid="a-1", retry_interval_s=0.05)
    ids = agent.register()
    assert (ids.service_id, ids.instance_id) == (1, 1)
    agent.ids.instance_id = 99
    assert agent.ping() is False
    assert (agent.ids.service_id, agent.ids.instance_id, agent.resets) == (0, 0, 1)
    assert (agent.register().service_id, agent.ids.instance_id) == (1, 1)
    agent.close()
