"""The internal port's cluster secret, in process on port 0: it takes the
secret and refuses the agent token; a cluster node needs a CA or a secret."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from skyoap.edge.auth import CLUSTER_METADATA_KEY, METADATA_KEY, AgentToken, ClusterSecret
from skyoap.edge.server import GrpcServer
from skyoap.model.inventory import INVENTORY_TYPES, ServiceInventory
from skyoap.model.stream import Stage, StreamTypes, worker_id
from skyoap.proto import remote_pb2
from skyoap.receiver.config import LimitsConfig
from skyoap.remote.config import ClusterKind
from skyoap.remote.grpc_client import CALL_BATCHED, encode_batch
from skyoap.remote.service import RemoteService
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.worker import Workers
from skyoap.storage.config import StorageKind
from skyoap.wiring.config import NodeConfig
from tests.unit.fakes import Collect


def internal_server(secret: str) -> tuple[GrpcServer, Collect[Any]]:
    workers = Workers()
    collect: Collect[Any] = Collect(worker_id(ServiceInventory, Stage.L2))
    workers.register(collect)
    server = GrpcServer("127.0.0.1", 0, max_message_bytes=1 << 22, token=ClusterSecret(secret))
    server.add(
        remote_pb2.DESCRIPTOR.services_by_name["RemoteService"],
        RemoteService(workers, StreamTypes(INVENTORY_TYPES), Instruments(), limits=LimitsConfig().items()),
        keep_undecodable=True,
    )
    server.start()
    return server, collect


def call_internal(port: int, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    batch = encode_batch([(worker_id(ServiceInventory, Stage.L2), ServiceInventory(name="injected"))])
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_unary(CALL_BATCHED, request_serializer=bytes, response_deserializer=bytes)
        try:
            call(iter([batch.SerializeToString()]), timeout=5, metadata=metadata)
            return grpc.StatusCode.OK
        except grpc.RpcError as e:
            return e.code()


def test_the_internal_port_takes_the_cluster_secret_and_refuses_the_agent_token() -> None:
    server, collect = internal_server("cluster-s3cret")
    try:
        assert call_internal(server.port, ((METADATA_KEY, "agent-token"),)) is grpc.StatusCode.UNAUTHENTICATED
        assert call_internal(server.port, ()) is grpc.StatusCode.UNAUTHENTICATED
        wrong = ((CLUSTER_METADATA_KEY, "agent-token"),)
        assert call_internal(server.port, wrong) is grpc.StatusCode.UNAUTHENTICATED
        assert collect.items == []
        assert call_internal(server.port, ((CLUSTER_METADATA_KEY, "cluster-s3cret"),)) is grpc.StatusCode.OK
        assert [i.name for i in collect.items] == ["injected"]
    finally:
        server.close(0)


def test_the_agent_token_is_not_the_cluster_secret() -> None:
    assert AgentToken("x").refusal([(CLUSTER_METADATA_KEY, "x")]) is not None
    assert ClusterSecret("x").refusal([(METADATA_KEY, "x")]) is not None


def test_a_cluster_node_needs_a_ca_or_a_secret_that_is_not_the_agent_token() -> None:
    cluster = NodeConfig().with_options(cluster=ClusterKind.REDIS, storage=StorageKind.ELASTICSEARCH)
    with pytest.raises(ValueError, match=r"needs --cluster-ca \(mutual TLS\) or --cluster-secret"):
        cluster.check()
    with pytest.raises(ValueError, match="--cluster-secret must differ from --auth-token"):
        cluster.with_options(cluster_secret="same", auth_token="same").check()
    with pytest.raises(ValueError, match="--cluster-secret must be printable ASCII"):
        cluster.with_options(cluster_secret="a\nb").check()
    cluster.with_options(cluster_secret="s3cret", auth_token="token").check()
    NodeConfig().check()  # a standalone node has no internal port
