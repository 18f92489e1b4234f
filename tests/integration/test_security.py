"""Security on real nodes: TLS on the agent port with certificates replaced on
disk, SkyWalking's own agent over TLS with a token, and a cluster whose nodes
take L1 results only from, and route them only to, holders of a certificate
of the cluster's CA."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent import futures
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor, descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from skyoap.agent import Agent
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.edge.auth import SendingClusterSecret, SendingToken
from skyoap.model import sketch
from skyoap.model.inventory import ServiceInstanceInventory, ServiceInventory
from skyoap.model.metrics import Downsampling, ServiceMetrics, minute_bucket
from skyoap.model.records import SegmentRecord
from skyoap.model.stream import Stage, worker_id
from skyoap.proto import remote_pb2
from skyoap.remote.cluster import Member, RedisCluster, Role
from skyoap.remote.config import ClusterKind
from skyoap.remote.grpc_client import CALL, CALL_BATCHED, encode, encode_batch
from skyoap.storage.config import StorageKind
from skyoap.storage.select import open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.certs import TestCa
from tests.conftest import wipe
from tests.integration.helpers import eventually, stored
from tests.integration.test_skywalking_v3 import AGENT_PYTHON, INSTRUMENTED_PROGRAM

HEALTH = health_pb2.HealthCheckRequest()


def embedded(tmp_path: Path, **options: object) -> NodeConfig:
    return NodeConfig().with_options(
        host="127.0.0.1", port=0, query_port=0, embedded_path=str(tmp_path / "skyoap.db"), **options
    )


def tls_channel(address: str, ca: Path) -> grpc.Channel:
    """A channel as an agent that trusts ``ca`` opens it."""
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(ca.read_bytes()))


def health_check(channel: grpc.Channel) -> grpc.StatusCode:
    """How the channel's first health check ends: OK, or the status of its failure."""
    try:
        health_pb2_grpc.HealthStub(channel).Check(HEALTH, timeout=5)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()
    finally:
        channel.close()


def test_the_agent_port_serves_tls_and_a_certificate_replaced_on_disk_without_a_restart(
    tmp_path: Path,
) -> None:
    first, second = TestCa(tmp_path / "ca1", "first CA"), TestCa(tmp_path / "ca2", "second CA")
    cert, key = first.issue("agents.skyoap", "server")
    node = Node(embedded(tmp_path, tls_cert=str(cert), tls_key=str(key))).start()
    try:
        agent = Agent(node.address, "tls-svc", channel=tls_channel(node.address, first.path))
        ids = agent.register(timeout_s=30)
        agent.close()
        assert (ids.service_id, ids.instance_id) == (1, 1)
        # Plaintext gets no answer at all.
        assert health_check(grpc.insecure_channel(node.address)) is grpc.StatusCode.UNAVAILABLE

        # The operator renews the certificate in place, from another CA.
        new_cert, new_key = second.issue("agents.skyoap", "renewed")
        cert.write_bytes(new_cert.read_bytes())
        key.write_bytes(new_key.read_bytes())
        assert health_check(tls_channel(node.address, second.path)) is grpc.StatusCode.OK
        assert health_check(tls_channel(node.address, first.path)) is grpc.StatusCode.UNAVAILABLE

        # Caught halfway through a replacement (a new certificate, the old key),
        # the node keeps serving the last good pair.
        third = TestCa(tmp_path / "ca3", "third CA")
        cert.write_bytes(third.issue("agents.skyoap", "half")[0].read_bytes())
        assert health_check(tls_channel(node.address, second.path)) is grpc.StatusCode.OK
        assert health_check(tls_channel(node.address, third.path)) is grpc.StatusCode.UNAVAILABLE
        assert [s.name for s in stored(node.config.storage, ServiceInventory)] == ["tls-svc"]
    finally:
        node.close()


def test_unusable_certificate_files_stop_the_node_from_starting_and_say_why(tmp_path: Path) -> None:
    ca = TestCa(tmp_path / "ca")
    cert, key = ca.issue("a.skyoap")
    other_cert, _ = ca.issue("b.skyoap")
    cases = [
        (str(tmp_path / "missing.pem"), str(key), f"cannot read the certificate {tmp_path / 'missing.pem'}"),
        (str(key), str(key), f"{key} is not a PEM certificate"),
        (str(other_cert), str(key), f"the key in {key} is not the key of the certificate in {other_cert}"),
    ]
    for cert_path, key_path, message in cases:
        with pytest.raises(ValueError) as refused:
            Node(embedded(tmp_path, tls_cert=cert_path, tls_key=key_path)).start()
        assert str(refused.value).startswith(message)
    with pytest.raises(ValueError, match="--tls-cert and --tls-key go together"):
        Node(embedded(tmp_path, tls_cert=str(cert)))


def test_skywalkings_agent_reports_over_tls_with_its_token_and_is_refused_with_a_wrong_one(
    tmp_path: Path,
) -> None:
    assert AGENT_PYTHON.exists(), (
        "run deploy/install.sh: it installs SkyWalking's Python agent in .venv-agent"
    )
    ca = TestCa(tmp_path / "ca")
    cert, key = ca.issue("oap.skyoap")
    config = embedded(
        tmp_path,
        tls_cert=str(cert),
        tls_key=str(key),
        auth_token="s3cret-token",
        metrics_persist_interval_s=0.5,
        metrics_l1_flush_period_s=0.2,
    )
    node = Node(config).start()
    program = tmp_path / "app.py"
    program.write_text(INSTRUMENTED_PROGRAM)

    def run(name: str, token: str) -> None:
        env = {
            **os.environ,
            "SW_AGENT_COLLECTOR_BACKEND_SERVICES": node.address,
            "SW_AGENT_NAME": name,
            "SW_AGENT_FORCE_TLS": "true",
            "SW_AGENT_AUTHENTICATION": token,
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(ca.path),
        }
        done = subprocess.run(
            [str(AGENT_PYTHON), str(program)], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-6000:]

    try:
        run("intruder-app", "wrong-token")
        run("orders-app", "s3cret-token")
        storage = open_storage(config.storage)
        try:
            everything = (0, 999_999_999_999)
            eventually(lambda: len(storage.records.query(SegmentRecord, *everything)) == 8)
            segments = storage.records.query(SegmentRecord, *everything)
            assert {s.service for s in segments} == {"orders-app"}
        finally:
            storage.close()
        assert [s.name for s in stored(config.storage, ServiceInventory)] == ["orders-app"]
        assert len(stored(config.storage, ServiceInstanceInventory)) == 1
    finally:
        node.close()


# --- a cluster of members only ---------------------------------------------


@pytest.fixture
def cluster_config(es_server: ElasticsearchServer, redis_server: RedisServer) -> Iterator[NodeConfig]:
    prefix = f"t{uuid.uuid4().hex[:12]}"
    yield NodeConfig().with_options(
        host="127.0.0.1",
        port=0,
        internal_port=0,
        query_port=0,
        cluster=ClusterKind.REDIS,
        storage=StorageKind.ELASTICSEARCH,
        es_hosts=es_server.url,
        es_index_prefix=prefix,
        redis_url=redis_server.url,
        redis_key_prefix=prefix,
        cluster_heartbeat_s=0.3,
        cluster_expiry_s=1.5,
        remote_refresh_interval_s=0.3,
    )
    wipe(es_server.url, redis_server.url, prefix)


class FakeAggregator:
    """A RemoteService on a certificate of its own that only counts what
    reaches it, registered in the cluster's Redis as an aggregator, as whoever
    can write to Redis could register it."""

    def __init__(self, config: NodeConfig, name: str, address: str, identity: str, ca: TestCa) -> None:
        self.items = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        handler = grpc.stream_unary_rpc_method_handler(
            self._take,
            request_deserializer=remote_pb2.RemoteBatch.FromString,
            response_serializer=remote_pb2.RemoteAck.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("skyoap.v1.RemoteService", {"callBatched": handler})]
        )
        health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), self.server)
        cert, key = ca.issue(identity or name, name)
        credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
        port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.server.start()
        record = Member(name, "aggregator", address, 0.0, "", f"127.0.0.1:{port}", identity)
        s = config.storage
        self.membership = RedisCluster(s.redis_url, s.redis_key_prefix, record, 0.3, 1.5)
        self.membership.start()

    def _take(self, batches: Iterator[remote_pb2.RemoteBatch], context: object) -> remote_pb2.RemoteAck:
        for batch in batches:
            self.items += len(batch.nextWorkerIds)
        return remote_pb2.RemoteAck()

    def close(self) -> None:
        self.membership.close()
        self.server.stop(0)


CLUSTER_SECRET = "cluster-s3cret"


def test_without_cluster_tls_the_internal_port_takes_only_the_cluster_secret(
    cluster_config: NodeConfig,
) -> None:
    """The agent token opens the agent port, never the internal one; nodes
    that share the secret send each other L1 results."""
    secret = {"cluster_secret": CLUSTER_SECRET, "auth_token": "agent-token"}
    aggregator = Node(cluster_config.with_options(role=Role.AGGREGATOR, **secret)).start()
    receiver = Node(cluster_config.with_options(role=Role.RECEIVER, **secret))
    try:
        receiver.start()
        assert aggregator.internal_address is not None
        item = encode(worker_id(ServiceInventory, Stage.L2), ServiceInventory(name="injected"))
        internal = aggregator.internal_address
        refused = [
            SendingToken("agent-token"),  # what every agent holds
            SendingClusterSecret("agent-token"),
            SendingClusterSecret("guess"),
        ]
        for sending in refused:
            channel = grpc.intercept_channel(grpc.insecure_channel(internal), sending)
            assert remote_call(channel, item) is grpc.StatusCode.UNAUTHENTICATED, sending
        assert remote_call(grpc.insecure_channel(internal), item) is grpc.StatusCode.UNAUTHENTICATED
        assert aggregator.instruments.value("skyoap_remote_service_received_total") == 0

        agent_channel = grpc.intercept_channel(
            grpc.insecure_channel(receiver.address), SendingToken("agent-token")
        )
        agent = Agent(receiver.address, "members-svc", retry_interval_s=0.1, channel=agent_channel)
        ids = agent.register(timeout_s=60)
        agent.close()
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert [s.name for s in stored(cluster_config.storage, ServiceInventory)] == ["members-svc"]
        assert aggregator.instruments.value("skyoap_remote_service_received_total") >= 2
        member = grpc.intercept_channel(grpc.insecure_channel(internal), SendingClusterSecret(CLUSTER_SECRET))
        assert remote_call(member, item) is grpc.StatusCode.OK
    finally:
        receiver.close()
        aggregator.close()


def test_a_cluster_node_with_neither_cluster_tls_nor_a_secret_does_not_start(
    cluster_config: NodeConfig,
) -> None:
    with pytest.raises(ValueError, match="needs --cluster-ca"):
        Node(cluster_config.with_options(role=Role.AGGREGATOR, auth_token="agent-token"))


def members_only(ca: TestCa, name: str) -> dict[str, str]:
    cert, key = ca.issue(name)
    return {"cluster_ca": str(ca.path), "cluster_cert": str(cert), "cluster_key": str(key)}


def test_only_holders_of_a_cluster_certificate_send_or_receive_l1_results(
    cluster_config: NodeConfig, tmp_path: Path
) -> None:
    ca, foreign = TestCa(tmp_path / "ca", "cluster CA"), TestCa(tmp_path / "foreign", "foreign CA")
    aggregator = Node(
        cluster_config.with_options(role=Role.AGGREGATOR, **members_only(ca, "aggregator-1.cluster"))
    ).start()
    # Two fakes sorted before it by address, so forever-first would send them
    # every inventory name: one names no identity, one a real member's identity
    # with a certificate of another CA.
    fakes = [
        FakeAggregator(cluster_config, "fake-0", "0.0.0.0:1", "", foreign),
        FakeAggregator(cluster_config, "fake-1", "0.0.0.1:1", "aggregator-1.cluster", foreign),
    ]
    receiver = Node(cluster_config.with_options(role=Role.RECEIVER, **members_only(ca, "receiver-1.cluster")))
    try:
        receiver.start()
        assert aggregator.internal is not None and receiver.internal is None
        internal = f"127.0.0.1:{aggregator.internal.port}"
        # The agent port serves no RemoteService and does not list it.
        names = list_services(aggregator.address)
        assert "skyoap.v1.RemoteService" not in names and "grpc.health.v1.Health" in names
        item = encode(worker_id(ServiceInventory, Stage.L2), ServiceInventory(name="injected"))
        assert remote_call(grpc.insecure_channel(aggregator.address), item) is grpc.StatusCode.UNIMPLEMENTED
        # The internal port takes no plaintext, no client without a certificate
        # and none with a certificate of another CA.
        assert remote_call(grpc.insecure_channel(internal), item) is grpc.StatusCode.UNAVAILABLE
        assert remote_call(member_channel(internal, ca, None), item) is grpc.StatusCode.UNAVAILABLE
        intruder = foreign.issue("receiver-1.cluster", "intruder")
        assert remote_call(member_channel(internal, ca, intruder), item) is grpc.StatusCode.UNAVAILABLE
        assert aggregator.instruments.value("skyoap_remote_service_received_total") == 0

        agent = Agent(receiver.address, "members-svc", retry_interval_s=0.1)
        ids = agent.register(timeout_s=60)
        agent.close()
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert [s.name for s in stored(cluster_config.storage, ServiceInventory)] == ["members-svc"]
        assert aggregator.instruments.value("skyoap_remote_service_received_total") >= 2
        assert receiver.instruments.value("skyoap_remote_targets") == 1
        assert [f.items for f in fakes] == [0, 0]
    finally:
        receiver.close()
        aggregator.close()
        for f in fakes:
            f.close()


def remote_call(channel: grpc.Channel, item: remote_pb2.RemoteMessage) -> grpc.StatusCode:
    """How a RemoteService call carrying ``item`` ends."""
    call = channel.stream_unary(
        CALL, request_serializer=remote_pb2.RemoteMessage.SerializeToString, response_deserializer=bytes
    )
    try:
        call(iter([item]), timeout=5)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()
    finally:
        channel.close()


def member_channel(address: str, ca: TestCa, cert: tuple[Path, Path] | None) -> grpc.Channel:
    """A channel to the aggregator's internal port as a node would open it."""
    key_pem = cert[1].read_bytes() if cert else None
    cert_pem = cert[0].read_bytes() if cert else None
    credentials = grpc.ssl_channel_credentials(ca.path.read_bytes(), key_pem, cert_pem)
    options = [("grpc.ssl_target_name_override", "aggregator-1.cluster")]
    return grpc.secure_channel(address, credentials, options=options)


def list_services(address: str) -> list[str]:
    """The services the server's reflection lists."""
    channel = grpc.insecure_channel(address)
    try:
        stream = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        (answer,) = stream(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
        return [s.name for s in answer.list_services_response.service]
    finally:
        channel.close()


def test_a_client_without_credentials_is_refused_by_every_service_on_both_ports(
    cluster_config: NodeConfig, tmp_path: Path
) -> None:
    """A mixed node of a cluster with everything on: TLS and a token on the
    agent port, mutual TLS on the internal one."""
    ca = TestCa(tmp_path / "ca", "cluster CA")
    cert, key = ca.issue("oap.skyoap", "agent-port")
    config = cluster_config.with_options(
        tls_cert=str(cert), tls_key=str(key), auth_token="s3cret", **members_only(ca, "mixed-1.cluster")
    )
    node = Node(config).start()
    try:
        assert node.server is not None and node.internal is not None
        internal = f"127.0.0.1:{node.internal.port}"
        methods = [
            method
            for name in node.server.services
            for method in descriptor_pool.Default().FindServiceByName(name).methods
        ]
        served = {m.containing_service.name for m in methods}
        agent_services = {"Register", "TraceSegmentReportService", "LogReportService", "EventService"}
        assert {*agent_services, "Health"} <= served
        for method in methods:
            expected = grpc.StatusCode.UNAUTHENTICATED
            if method.containing_service.full_name == "grpc.health.v1.Health":
                if method.name != "Check":
                    continue  # a Watch answers as long as the client waits
                expected = grpc.StatusCode.OK  # health checks stay open
            got = attempt(tls_channel(node.address, ca.path), method)
            assert got is expected, (method.full_name, got)
            assert attempt(grpc.insecure_channel(node.address), method) is grpc.StatusCode.UNAVAILABLE
        reflection = descriptor_pool.Default().FindServiceByName("grpc.reflection.v1alpha.ServerReflection")
        for method in reflection.methods:
            assert attempt(tls_channel(node.address, ca.path), method) is grpc.StatusCode.UNAUTHENTICATED
        for method in descriptor_pool.Default().FindServiceByName("skyoap.v1.RemoteService").methods:
            # A client that trusts the cluster's CA but presents no certificate of it.
            assert attempt(member_channel(internal, ca, None), method) is grpc.StatusCode.UNAVAILABLE
        assert [stored(config.storage, m) for m in (ServiceInventory, ServiceInstanceInventory)] == [[], []]

        channel = grpc.intercept_channel(tls_channel(node.address, ca.path), SendingToken("s3cret"))
        agent = Agent(node.address, "trusted-svc", channel=channel)
        ids = agent.register(timeout_s=60)
        agent.close()
        assert (ids.service_id, ids.instance_id) == (1, 1)
    finally:
        node.close()


def attempt(channel: grpc.Channel, method: descriptor.MethodDescriptor) -> grpc.StatusCode:
    """How a call of ``method`` with an empty message ends."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    try:
        if method.client_streaming and method.server_streaming:
            list(channel.stream_stream(path)(iter([b""]), timeout=5))
        elif method.client_streaming:
            channel.stream_unary(path)(iter([b""]), timeout=5)
        elif method.server_streaming:
            list(channel.unary_stream(path)(b"", timeout=5))
        else:
            channel.unary_unary(path)(b"", timeout=5)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()
    finally:
        channel.close()


def test_items_injected_into_the_internal_port_are_checked_as_at_the_edge(cluster_config: NodeConfig) -> None:
    """Whoever holds the cluster secret (without cluster TLS) can send; what no
    receiver sends is refused, and the metrics stored stay exact."""
    config = cluster_config.with_options(
        role=Role.AGGREGATOR, metrics_persist_interval_s=0.3, cluster_secret=CLUSTER_SECRET
    )
    node = Node(config).start()
    try:
        now_ms = int(time.time() * 1000)
        minute = minute_bucket(now_ms)
        histogram = sketch.of_latencies([3, 3])
        good = ServiceMetrics(
            time_bucket=minute, service="shop", calls=2, latency_sum_ms=6, histogram=histogram
        )
        crafted = [
            replace(good, histogram=(2,)),  # would break every later merge of the row
            replace(good, calls=-5, histogram=()),
            ServiceInstanceInventory(
                name="i", service_id=1, instance_uuid="i", heartbeat_time=now_ms + 86_400_000, active=False
            ),
        ]
        l2 = worker_id(ServiceMetrics, Stage.L2)
        batch = encode_batch([(l2, good), *((worker_id(type(c), Stage.L2), c) for c in crafted), (l2, good)])
        assert node.internal_address is not None
        member = SendingClusterSecret(CLUSTER_SECRET)
        with grpc.intercept_channel(grpc.insecure_channel(node.internal_address), member) as channel:
            call = channel.stream_unary(
                CALL_BATCHED,
                request_serializer=remote_pb2.RemoteBatch.SerializeToString,
                response_deserializer=remote_pb2.RemoteAck.FromString,
            )
            ack = call(iter([batch]), timeout=10)
        assert (ack.received, ack.rejected) == (2, 3)
        assert node.instruments.value("skyoap_remote_service_rejected_total") == 3
        storage = open_storage(cluster_config.storage)
        try:

            def rows() -> list[tuple[str, int, int, tuple[int, ...]]]:
                found = storage.metrics.query(ServiceMetrics, Downsampling.MINUTE, minute, minute)
                return [(m.service, m.calls, m.latency_sum_ms, m.histogram) for m in found]

            four = sketch.of_latencies([3] * 4)
            eventually(lambda: rows() == [("shop", 4, 12, four)])
            assert stored(cluster_config.storage, ServiceInstanceInventory) == []
        finally:
            storage.close()
    finally:
        node.close()
