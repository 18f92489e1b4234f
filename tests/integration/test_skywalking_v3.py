"""SkyWalking's v3 agent protocol: agents built for SkyWalking register by names
and heart-beat, unchanged."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from deploy.node import Node
from pipeline.config import NodeConfig
from pipeline.inventory import (
    EndpointInventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from proto.skywalking import common_pb2, configuration_pb2, management_pb2, profile_pb2, tracing_pb2
from tests.integration.helpers import eventually, stored

ROOT = Path(__file__).resolve().parents[2]
AGENT_PYTHON = ROOT / ".venv-agent" / "bin" / "python"


def instances(config: NodeConfig) -> dict[str, ServiceInstanceInventory]:
    return {i.instance_uuid: i for i in stored(config, ServiceInstanceInventory)}


def test_instances_register_by_name_and_keep_alive(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    with grpc.insecure_channel(node.address) as channel:
        management = channel.unary_unary(
            "/skywalking.v3.ManagementService/reportInstanceProperties",
            request_serializer=management_pb2.InstanceProperties.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        keep_alive = channel.unary_unary(
            "/skywalking.v3.ManagementService/keepAlive",
            request_serializer=management_pb2.InstancePingPkg.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        answer = management(
            management_pb2.InstanceProperties(
                service="shop",
                serviceInstance="shop-1@host-a",
                properties=[common_pb2.KeyStringValuePair(key="hostname", value="host-a")],
                layer="GENERAL",
            ),
            timeout=10,
        )
        assert list(answer.commands) == []
        # An instance that only ever heart-beats is registered too.
        keep_alive(
            management_pb2.InstancePingPkg(service="shop", serviceInstance="shop-2@host-b"), timeout=10
        )

        eventually(lambda: len(instances(node_config)) == 2, timeout_s=30)
        rows = instances(node_config)
        (service,) = stored(node_config, ServiceInventory)
        assert service.name == "shop"
        assert {r.service_id for r in rows.values()} == {service.sequence}
        assert dict(rows["shop-1@host-a"].properties) == {"hostname": "host-a", "layer": "GENERAL"}
        assert rows["shop-1@host-a"].name == "shop-1@host-a"
        first_beat = rows["shop-2@host-b"].heartbeat_time

        keep_alive(
            management_pb2.InstancePingPkg(service="shop", serviceInstance="shop-2@host-b"), timeout=10
        )
        eventually(lambda: instances(node_config)["shop-2@host-b"].heartbeat_time > first_beat, timeout_s=30)

        polled = channel.unary_unary(
            "/skywalking.v3.ProfileTask/getProfileTaskCommands",
            request_serializer=profile_pb2.ProfileTaskCommandQuery.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(profile_pb2.ProfileTaskCommandQuery(service="shop", serviceInstance="shop-1@host-a"), timeout=10)
        assert list(polled.commands) == []
        fetched = channel.unary_unary(
            "/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations",
            request_serializer=configuration_pb2.ConfigurationSyncRequest.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(configuration_pb2.ConfigurationSyncRequest(service="shop"), timeout=10)
        assert list(fetched.commands) == []

        # Segments sent in one call: their entry endpoints and exit peers are registered.
        now_ms = int(time.time() * 1000)
        channel.unary_unary(
            "/skywalking.v3.TraceSegmentReportService/collectInSync",
            request_serializer=tracing_pb2.SegmentCollection.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )(
            tracing_pb2.SegmentCollection(
                segments=[
                    tracing_pb2.SegmentObject(
                        traceId="t1",
                        traceSegmentId="s1",
                        service="shop",
                        serviceInstance="shop-1@host-a",
                        spans=[
                            tracing_pb2.SpanObject(
                                spanId=0,
                                spanType=tracing_pb2.Entry,
                                operationName="POST:/pay",
                                startTime=now_ms,
                                endTime=now_ms + 20,
                            ),
                            tracing_pb2.SpanObject(
                                spanId=1,
                                spanType=tracing_pb2.Exit,
                                peer="bank:443",
                                startTime=now_ms + 5,
                                endTime=now_ms + 15,
                            ),
                        ],
                    )
                ]
            ),
            timeout=10,
        )
        eventually(lambda: [e.name for e in stored(node_config, EndpointInventory)] == ["POST:/pay"])
        eventually(lambda: [a.name for a in stored(node_config, NetworkAddressInventory)] == ["bank:443"])


def test_an_empty_service_name_is_refused(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    with grpc.insecure_channel(node.address) as channel:
        call = channel.unary_unary(
            "/skywalking.v3.ManagementService/keepAlive",
            request_serializer=management_pb2.InstancePingPkg.SerializeToString,
            response_deserializer=common_pb2.Commands.FromString,
        )
        try:
            call(management_pb2.InstancePingPkg(service="", serviceInstance="x"), timeout=10)
        except grpc.RpcError as e:
            assert e.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert e.details() == "service name #0 is empty"
        else:
            raise AssertionError("an empty service name was accepted")


def test_the_official_python_agent_registers_its_service_and_instance(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    node = start_node(node_config)
    program = tmp_path / "app.py"
    program.write_text(
        "import logging, time\n"
        "from skywalking import agent\n"
        "agent.start()\n"
        "from skywalking.trace.context import get_context\n"
        "for _ in range(5):\n"
        "    with get_context().new_entry_span(op='GET:/orders'):\n"
        "        logging.getLogger('app').warning('order taken')\n"
        "        with get_context().new_exit_span(op='SELECT orders', peer='db.internal:5432'):\n"
        "            time.sleep(0.01)\n"
        "time.sleep(3)\n"  # the agent reports every second, and flushes at exit
    )
    env = {
        **os.environ,
        "SW_AGENT_COLLECTOR_BACKEND_SERVICES": node.address,
        "SW_AGENT_NAME": "official-python",
        "SW_AGENT_INSTANCE_NAME": "official-python-1",
    }
    run = subprocess.run(
        [str(AGENT_PYTHON), str(program)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-6000:]
    eventually(lambda: instances(node_config) and stored(node_config, EndpointInventory), timeout_s=30)
    rows = instances(node_config)
    (service,) = stored(node_config, ServiceInventory)
    assert service.name == "official-python"
    assert list(rows) == ["official-python-1"]
    assert rows["official-python-1"].service_id == service.sequence
    # The agent reports its host and process as instance properties.
    assert "hostname" in rows["official-python-1"].properties
    # Names in its segments: the endpoint its entry span serves, the peer its exit span calls.
    endpoints = stored(node_config, EndpointInventory)
    assert [(e.name, e.service_id, e.detect_point) for e in endpoints] == [
        ("GET:/orders", service.sequence, 1)
    ]
    eventually(lambda: [a.name for a in stored(node_config, NetworkAddressInventory)] == ["db.internal:5432"])
    # Its five segments and five log records reached the node (storing them is yet to come).
    assert node.instruments.value("v3_segments_received_total") == 5
    assert node.instruments.value("v3_logs_received_total") == 5
