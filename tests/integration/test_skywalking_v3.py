"""SkyWalking's v3 agent protocol: agents built for SkyWalking register by names
and heart-beat, unchanged."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from skyoap.model.inventory import (
    EndpointInventory,
    NetworkAddressInventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import (
    SEP,
    Downsampling,
    EndpointMetrics,
    MeterMetrics,
    ServiceMetrics,
    ServiceRelationMetrics,
)
from skyoap.model.records import LogRecord, SegmentRecord
from skyoap.model.spans import SEARCHABLE_TRACE_TAGS, SegmentRules
from skyoap.proto.skywalking import common_pb2, configuration_pb2, management_pb2, profile_pb2, tracing_pb2
from skyoap.receiver import accelerator, traces
from skyoap.runtime import clock
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually, stored

ROOT = Path(__file__).resolve().parents[2]
AGENT_PYTHON = ROOT / ".venv-agent" / "bin" / "python"


def instances(config: NodeConfig) -> dict[str, ServiceInstanceInventory]:
    return {i.instance_uuid: i for i in stored(config.storage, ServiceInstanceInventory)}


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

        eventually(lambda: len(instances(node_config)) == 2)
        rows = instances(node_config)
        (service,) = stored(node_config.storage, ServiceInventory)
        assert service.name == "shop"
        assert {r.service_id for r in rows.values()} == {service.sequence}
        assert dict(rows["shop-1@host-a"].properties) == {"hostname": "host-a", "layer": "GENERAL"}
        assert rows["shop-1@host-a"].name == "shop-1@host-a"
        first_beat = rows["shop-2@host-b"].heartbeat_time

        keep_alive(
            management_pb2.InstancePingPkg(service="shop", serviceInstance="shop-2@host-b"), timeout=10
        )
        eventually(lambda: instances(node_config)["shop-2@host-b"].heartbeat_time > first_beat)

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
        eventually(lambda: [e.name for e in stored(node_config.storage, EndpointInventory)] == ["POST:/pay"])
        eventually(
            lambda: [a.name for a in stored(node_config.storage, NetworkAddressInventory)] == ["bank:443"]
        )


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


INSTRUMENTED_PROGRAM = """
import logging, threading, time, urllib.request
from skywalking import agent
agent.start()
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Orders(BaseHTTPRequestHandler):
    def do_GET(self):
        logging.getLogger("app").warning("order %s taken", self.path)
        self.send_response(500 if self.path.endswith("/fail") else 200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Orders)
threading.Thread(target=server.serve_forever, daemon=True).start()
for path in ["/orders/1", "/orders/2", "/orders/3", "/orders/fail"]:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}{path}").read()
    except OSError:
        pass
time.sleep(3)  # the agent reports every second, and flushes at exit
server.shutdown()
"""


def read_the_same_by_both_paths(segments: list[bytes], config: NodeConfig) -> None:
    """The receiver's accelerator reads an agent's segments, tags included,
    as protobuf's path does."""
    scanner = accelerator.scanner
    assert scanner is not None, "the accelerator is not built (pip install -e . with a C compiler)"
    rules, now_ms = SegmentRules(config.limits.items(), frozenset(SEARCHABLE_TRACE_TAGS)), clock.now_ms()
    tagged = 0
    for data in segments:
        fields = scanner.scan(data, rules.scan_args, now_ms)
        pure = traces.segment_of(tracing_pb2.SegmentObject.FromString(data), rules)
        rules.check(pure, now_ms)
        assert repr(fields) == repr(
            (pure.trace_id, pure.segment_id, pure.service, pure.instance, pure.spans, pure.tags)
        )
        tagged += bool(pure.tags)
    assert tagged > 0


def test_the_official_python_agent_reports_and_its_data_is_stored(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], tmp_path: Path
) -> None:
    """A small HTTP service instrumented by SkyWalking's own Python agent (its
    http.server and urllib plugins) calls itself four times, one call failing."""
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    node = start_node(node_config.with_options(metrics_persist_interval_s=0.5, metrics_l1_flush_period_s=0.2))
    program = tmp_path / "app.py"
    program.write_text(INSTRUMENTED_PROGRAM)
    env = {
        **os.environ,
        "SW_AGENT_COLLECTOR_BACKEND_SERVICES": node.address,
        "SW_AGENT_NAME": "orders-app",
        "SW_AGENT_METER_REPORTER_PERIOD": "1",  # its default, 20 s, outlasts the program
    }
    run = subprocess.run(
        [str(AGENT_PYTHON), str(program)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-6000:]
    eventually(
        lambda: instances(node_config) and len(stored(node_config.storage, EndpointInventory)) == 4,
        timeout_s=30,
    )
    (service,) = stored(node_config.storage, ServiceInventory)
    assert service.name == "orders-app"
    (instance,) = instances(node_config).values()
    assert instance.service_id == service.sequence
    assert "hostname" in instance.properties  # the agent reports its host as instance properties
    endpoints = stored(node_config.storage, EndpointInventory)
    assert sorted((e.name, e.service_id, e.detect_point) for e in endpoints) == [
        (f"/orders/{n}", service.sequence, 1) for n in ("1", "2", "3", "fail")
    ]
    # urllib's exit spans call the program's own address.
    (peer,) = eventually(lambda: stored(node_config.storage, NetworkAddressInventory))
    assert peer.name.startswith("127.0.0.1:")

    storage = open_storage(node_config.storage)
    try:
        everything = (0, 999_999_999_999)
        # Each call is an exit segment (urllib) and an entry segment (http.server).
        eventually(lambda: len(storage.records.query(SegmentRecord, *everything)) == 8)
        segments = storage.records.query(SegmentRecord, *everything)
        assert sorted((s.endpoint, s.is_error) for s in segments) == sorted(
            [(f"/orders/{n}", n == "fail") for n in ("1", "2", "3", "fail")] * 2
        )
        assert {s.instance for s in segments} == {instance.instance_uuid}
        read_the_same_by_both_paths([base64.b64decode(s.data) for s in segments], node_config)
        eventually(lambda: len(storage.records.query(LogRecord, *everything)) == 4)
        logs = storage.records.query(LogRecord, *everything)
        assert sorted(r.endpoint for r in logs) == [f"/orders/{n}" for n in ("1", "2", "3", "fail")]
        assert all(r.content.endswith(f"order {r.endpoint} taken") and r.trace_id for r in logs)

        def calls() -> dict[str, tuple[int, int]]:
            out = {}
            for model in (ServiceMetrics, EndpointMetrics, ServiceRelationMetrics):
                for m in storage.metrics.query(model, Downsampling.DAY, *everything):
                    out[m.entity().replace(SEP, " ")] = (m.calls, m.errors)
            return out

        want = {
            "orders-app": (4, 1),
            **{f"orders-app /orders/{n}": (1, int(n == "fail")) for n in ("1", "2", "3", "fail")},
            "orders-app orders-app server": (4, 1),
            # The entry spans' references name the address urllib called: an
            # alias of orders-app, learned before the exit spans (whose
            # segments end later) are measured. One relation, both sides.
            "orders-app orders-app client": (4, 1),
        }
        eventually(lambda: calls() == want)
        # Its process meters (CPU, memory, threads, GC) arrive as metrics.
        meters = eventually(
            lambda: storage.metrics.query(MeterMetrics, Downsampling.MINUTE, *everything), timeout_s=30
        )
        assert {m.service for m in meters} == {"orders-app"}
        assert "instance_pvm_thread_active_count" in {m.name for m in meters}
        # ... and through the rules of the Python agent's runtime, under SkyWalking's names.
        runtime = {
            f"meter_instance_pvm_{n}" for n in ("thread_active_count", "process_cpu_utilization", "gc_g0")
        }

        def made() -> set[str]:
            found = storage.metrics.query(MeterMetrics, Downsampling.MINUTE, *everything)
            return {m.name for m in found if m.layer == "GENERAL" and m.instance == instance.name} & runtime

        eventually(lambda: made() == runtime, timeout_s=30)
    finally:
        storage.close()
