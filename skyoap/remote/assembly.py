"""What a node's cluster section builds: the internal server other nodes
send L1 results to, the membership the node registers in, and the route its
L1 results take (the client set and the sender over it)."""

from __future__ import annotations

import logging

import grpc

from skyoap.edge.assembly import grpc_server
from skyoap.edge.auth import ClusterSecret, SendingClusterSecret
from skyoap.edge.config import ServerConfig
from skyoap.edge.server import GrpcServer
from skyoap.edge.tls import ClientTls, ServerTls
from skyoap.remote.client import RemoteClient, SelfRemoteClient
from skyoap.remote.cluster import ClusterNodesQuery, Member, RedisCluster, RemoteNode, StandaloneCluster
from skyoap.remote.config import ClusterConfig, ClusterKind
from skyoap.remote.grpc_client import GrpcRemoteClient
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.sender import RemoteSender
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.worker import Workers
from skyoap.storage.config import StorageConfig

log = logging.getLogger(__name__)


class _SelfWhenAlone:
    """The targets a cluster lists or, when it lists none, the node itself: a
    node that takes L1 results stores its own L1's in its own L2 before it
    has registered and once it has left, at its close. Otherwise they would
    be held for a target until the close dropped them: a node alone in its
    cluster, or the worker processes of one node all stopping at once, would
    lose what their L1 took last."""

    def __init__(self, cluster: ClusterNodesQuery, me: RemoteNode) -> None:
        self._cluster = cluster
        self._me = me

    def remote_nodes(self) -> list[RemoteNode]:
        return self._cluster.remote_nodes() or [self._me]


class Peers:
    """A node's side of its cluster, as ``config`` sets it up; ``workers``
    are the node's own, where what it routes to itself goes."""

    def __init__(self, config: ClusterConfig, workers: Workers, instruments: Instruments) -> None:
        self.config = config
        self._tls = (
            ClientTls(config.cluster_ca, config.cluster_cert, config.cluster_key)
            if config.cluster_ca
            else None
        )
        self._workers = workers
        self._instruments = instruments
        self._sender: RemoteSender | None = None
        self._unanswered = RateLimitedLog(log)

    @property
    def identity(self) -> str:
        """The identity of this node's certificate of the cluster's CA ("" without cluster TLS)."""
        return self._tls.identity if self._tls else ""

    def internal_server(
        self, server: ServerConfig, deadline_s: float, budget: MemoryBudget
    ) -> GrpcServer | None:
        """Where other nodes' L1 results come in, for the targets of a cluster,
        with calls bounded apart from the agents'; None for other nodes."""
        c = self.config
        if not (c.role.is_target and c.kind is ClusterKind.REDIS):
            return None
        tls = ServerTls(c.cluster_cert, c.cluster_key, client_ca=c.cluster_ca) if c.cluster_ca else None
        # Members only: a certificate of the cluster's CA, the cluster's secret,
        # or both; never the agent token.
        members = ClusterSecret(c.cluster_secret) if c.cluster_secret else None
        return grpc_server(server, server.internal_port, deadline_s, budget, members, tls, reflection=False)

    def membership(self, storage: StorageConfig, me: Member) -> RedisCluster | StandaloneCluster:
        """The cluster ``me`` registers in (its heartbeats start with it)."""
        c = self.config
        if c.kind is ClusterKind.STANDALONE:
            return StandaloneCluster(me)
        return RedisCluster(
            storage.redis_url,
            storage.redis_key_prefix,
            me,
            c.heartbeat_s,
            c.expiry_s,
            require_identity=self._tls is not None,
            ca=storage.redis_ca,
        )

    def route(
        self, cluster: ClusterNodesQuery, me: RemoteNode, budget: MemoryBudget
    ) -> tuple[RemoteSender, RemoteClientManager]:
        """The client set L1 results are routed over (only they travel between
        nodes) and the sender over it; ``me`` is this node as its membership
        lists it, so that leaving changes no client."""
        targets = _SelfWhenAlone(cluster, me) if self.config.role.is_target else cluster
        manager = RemoteClientManager(targets, self._client, self.config.remote_refresh_interval_s)
        self._sender = RemoteSender(manager, self._instruments, budget)
        self._instruments.gauge("skyoap_remote_targets", "nodes L1 results go to").set_function(
            lambda: len(manager.clients)
        )
        return self._sender, manager

    def _client(self, node: RemoteNode) -> RemoteClient | None:
        """A client for ``node``, or None until it answers over its channel
        (with cluster TLS, only as the identity its membership names)."""
        if node.is_self:
            return SelfRemoteClient(node.address, self._workers)
        assert self._sender is not None
        if self._tls is not None:
            channel = self._tls.channel(node.internal, node.identity)
        else:
            channel = grpc.insecure_channel(node.internal)
        if self.config.cluster_secret:
            channel = grpc.intercept_channel(channel, SendingClusterSecret(self.config.cluster_secret))
        client = GrpcRemoteClient(
            node.address,
            self._instruments,
            self.config.remote_buffer_size,
            self._sender.reroute,
            channel=channel,
            incarnation=node.incarnation,
        )
        if client.answers():
            return client
        client.close(0)
        self._unanswered.warning(
            node.address,
            "not routing to %s yet: its RemoteService at %s does not answer%s",
            node.address,
            node.internal,
            f" as {node.identity} with a certificate of the cluster's CA" if node.identity else "",
        )
        return None
