"""A node: storage, worker chains, remote clients and servers assembled for its role."""

from __future__ import annotations

import logging
import os
import threading
import time

from aggregator.housekeeping import HeartbeatExpiry, TopicRetention
from aggregator.publish import TopicPublisher
from edge.server import GrpcServer
from model.inventory import INVENTORY_TYPES
from model.metrics import METRICS_TYPES
from model.records import RECORD_TYPES
from model.stream import StreamTypes
from model.topics import Retention, Topic
from receiver.cache import InventoryCache
from receiver.checks import TelemetryLimits
from receiver.registration import Limits, Registrar
from receiver.services import add_agent_services
from receiver.skywalking import NamesByService, Sinks, add_skywalking_services
from remote.client import RemoteClient, SelfRemoteClient
from remote.cluster import Member, RedisCluster, RemoteNode, Role, StandaloneCluster
from remote.grpc_client import GrpcRemoteClient
from remote.manager import RemoteClientManager
from remote.sender import RemoteSender
from remote.service import add_remote_service
from runtime.instruments import Instruments
from runtime.pools import DrainPools
from runtime.worker import Workers
from storage.config import StorageKind
from storage.select import OpenStorage, open_storage
from wiring.admin import AdminServer
from wiring.chains import (
    InventoryStreamProcessor,
    MetricsStreamProcessor,
    RecordStreamProcessor,
    StreamProcessor,
)
from wiring.config import ClusterKind, NodeConfig

log = logging.getLogger(__name__)


def check(config: NodeConfig) -> None:
    """Refuses configurations that cannot work, saying why."""
    if config.cluster.kind is ClusterKind.STANDALONE and config.cluster.role is not Role.MIXED:
        raise ValueError(
            f"a {config.cluster.role.value} node needs other nodes: run it with --cluster redis "
            "(a standalone node must be mixed)"
        )
    if config.cluster.kind is ClusterKind.REDIS and config.storage.kind is StorageKind.EMBEDDED:
        raise ValueError("nodes of a cluster must share their storage: use --storage elasticsearch")


class Node:
    def __init__(self, config: NodeConfig) -> None:
        check(config)
        self.config = config
        self.instruments = Instruments()
        self.storage: OpenStorage | None = None
        self.server: GrpcServer | None = None
        self.pools = DrainPools(self.instruments)
        self.workers = Workers()
        self._cluster: RedisCluster | StandaloneCluster | None = None
        self._clients: RemoteClientManager | None = None
        self._sender: RemoteSender | None = None
        self._housekeeping: list[HeartbeatExpiry | TopicRetention] = []
        self._publisher: TopicPublisher | None = None
        self._v3_names: NamesByService | None = None
        self._processors: list[StreamProcessor] = []
        self._admin: AdminServer | None = None
        self._closed = threading.Event()

    @property
    def port(self) -> int:
        assert self.server is not None, "the node is not started"
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.config.server.advertised_host}:{self.port}"

    @property
    def name(self) -> str:
        where = self.address if self.server is not None else "(not started)"
        return self.config.cluster.node_name or f"{self.config.cluster.role.value}@{where}"

    @property
    def admin_port(self) -> int | None:
        return self._admin.port if self._admin else None

    def start(self) -> Node:
        """Builds and starts everything; on failure, closes what was started."""
        try:
            return self._start()
        except BaseException:
            self.close(grace_s=0)
            raise

    def _start(self) -> Node:
        cfg = self.config
        role = cfg.cluster.role
        self.storage = storage = open_storage(cfg.storage)
        storage.inventory.install(INVENTORY_TYPES)
        storage.metrics.install(METRICS_TYPES)
        storage.records.install(RECORD_TYPES)
        storage.topics.install({t.value: cfg.topics.partitions for t in Topic})
        # A topic keeps the partition count it was created with.
        partitions = {t: len(storage.topics.bounds(t.value)) for t in Topic}
        self._publisher = publisher = TopicPublisher(storage.topics, partitions, self.instruments)
        # The server binds its port first, so the node knows the address it
        # registers and routes under before anything is built on it.
        self.server = server = GrpcServer(
            cfg.server.host, cfg.server.port, cfg.server.grpc_workers, cfg.server.max_message_bytes
        )
        if cfg.server.admin_port >= 0:
            self._admin = AdminServer(cfg.server.host, cfg.server.admin_port, self.instruments)
        self._cluster = self._join_cluster()
        if role.takes_agents:  # only L1 results travel between nodes
            self._clients = RemoteClientManager(
                self._cluster, self._make_client, cfg.cluster.remote_refresh_interval_s
            )
            self._sender = RemoteSender(self._clients, self.instruments, cfg.cluster.remote_park_size)
            clients = self._clients
            self.instruments.gauge("skyoap_remote_targets", "nodes L1 results go to").set_function(
                lambda: len(clients.clients)
            )
        cache = InventoryCache(storage.inventory, cfg.workers.cache_size, cfg.workers.miss_recheck_s)
        processor = InventoryStreamProcessor(
            cfg,
            storage.inventory,
            storage.sequences,
            self.pools,
            self.workers,
            self._sender,
            self.instruments,
            selector=cfg.cluster.inventory_selector,
            # A mixed node's L2 tells its own receiver of new ids at once.
            on_stored=cache.learn if role is Role.MIXED else None,
            publisher=publisher,
        )
        metrics = MetricsStreamProcessor(
            cfg, storage.metrics, self.pools, self.workers, self._sender, self.instruments, publisher
        )
        records = RecordStreamProcessor(
            cfg, storage.records, self.pools, self.workers, self.instruments, publisher
        )
        self._processors = [processor, metrics, records]
        if role.takes_agents:
            limits = Limits(
                cfg.limits.max_name_length,
                cfg.limits.max_batch_items,
                cfg.limits.max_properties_chars,
                cfg.workers.resend_after_s,
            )
            registrar = Registrar(cache, processor.entry, limits)
            add_agent_services(server, registrar)
            telemetry = TelemetryLimits(
                cfg.limits.max_name_length,
                int(cfg.limits.telemetry_max_age_s * 1000),
                int(cfg.limits.telemetry_max_ahead_s * 1000),
            )
            self._v3_names = add_skywalking_services(
                server, registrar, Sinks(metrics.entry, records.entry), telemetry, self.instruments
            )
            self._v3_names.start()
        if role.is_target:
            add_remote_service(
                server, self.workers, StreamTypes((*INVENTORY_TYPES, *METRICS_TYPES)), self.instruments
            )
            self._housekeeping = [
                HeartbeatExpiry(
                    storage.inventory, cfg.workers.heartbeat_expiry_s, cfg.workers.housekeeping_interval_s
                ),
                TopicRetention(
                    storage.topics,
                    Retention(cfg.topics.retention_s, cfg.topics.retention_records),
                    cfg.workers.housekeeping_interval_s,
                ),
            ]
            for task in self._housekeeping:
                task.start()
        self.pools.start()
        for p in self._processors:
            p.start()
        if self._admin is not None:
            self._admin.start()
        server.start()
        self._cluster.start()  # only now: other nodes may route to us from here on
        if self._clients is not None:
            self._clients.start()
        log.info(
            "node %s started: role=%s grpc=%s storage=%s cluster=%s%s",
            self.name,
            role.value,
            self.address,
            cfg.storage.kind.value,
            cfg.cluster.kind.value,
            f" admin=http://{cfg.server.host}:{self._admin.port}/metrics" if self._admin else "",
        )
        return self

    def _join_cluster(self) -> RedisCluster | StandaloneCluster:
        cfg = self.config
        if cfg.cluster.kind is ClusterKind.STANDALONE:
            return StandaloneCluster(self.address)
        admin = f"{cfg.server.advertised_host}:{self._admin.port}" if self._admin else ""
        me = Member(self.name, cfg.cluster.role.value, self.address, time.time(), admin)
        return RedisCluster(
            cfg.storage.redis_url,
            cfg.storage.redis_key_prefix,
            me,
            cfg.cluster.heartbeat_s,
            cfg.cluster.expiry_s,
        )

    def _make_client(self, node: RemoteNode) -> RemoteClient:
        if node.is_self:
            return SelfRemoteClient(node.address, self.workers)
        assert self._sender is not None
        return GrpcRemoteClient(
            node.address, self.instruments, self.config.cluster.remote_buffer_size, self._sender.reroute
        )

    def close(self, grace_s: float = 5.0) -> None:
        """Leaves the cluster and answers NOT_SERVING to health checks; an
        aggregator keeps serving until every receiver's next refresh has routed
        elsewhere. Then stops taking calls, drains the chains in order (L1 into
        L2 or other nodes, L2 into storage) and closes storage. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.server is not None:
            self.server.refuse()
        if self._cluster is not None:
            self._cluster.close()
            if isinstance(self._cluster, RedisCluster) and self.config.cluster.role.is_target:
                time.sleep(self.config.cluster.remote_refresh_interval_s + 0.5)
        if self.server is not None:
            self.server.stop(grace_s)
        for task in self._housekeeping:
            task.close()
        if self._v3_names is not None:
            self._v3_names.close()
        for p in self._processors:
            p.close_l1(grace_s)
        if self._publisher is not None:
            self._publisher.close()  # as L2 below: what storage does not take at once is dropped
        for p in self._processors:
            p.close_l2(grace_s)
        if self._clients is not None:
            self._clients.close(grace_s)  # each client sends what it holds before it goes
        if self._admin is not None:
            self._admin.close()
        if self.storage is not None:
            self.storage.close()
        log.info("node %s stopped (pid %d)", self.name, os.getpid())

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
