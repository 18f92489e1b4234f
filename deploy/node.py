"""A node: storage, worker chains, remote clients and servers assembled for its role."""

from __future__ import annotations

import contextlib
import logging
import threading

from aggregator.housekeeping import HeartbeatExpiry
from deploy.admin import AdminServer
from pipeline.config import NodeConfig
from pipeline.consumers import ConsumerPools
from pipeline.instruments import Instruments
from pipeline.inventory import INVENTORY_TYPES
from pipeline.processor import L1_POOL, L2_POOL, InventoryStreamProcessor
from pipeline.worker import Workers
from receiver.cache import InventoryCache
from receiver.registration import Limits, Registrar
from receiver.server import GrpcServer
from remote.client import RemoteClient, SelfRemoteClient
from remote.cluster import RemoteNode, Role, StandaloneCluster
from remote.manager import RemoteClientManager
from storage.select import OpenStorage, open_storage

log = logging.getLogger(__name__)


class Node:
    def __init__(self, config: NodeConfig) -> None:
        if config.role is not Role.MIXED:
            raise ValueError(
                f"role {config.role.value} needs a cluster of nodes; a standalone node must be mixed"
            )
        self.config = config
        self.instruments = Instruments()
        self.storage: OpenStorage | None = None
        self.server: GrpcServer | None = None
        self.pools = ConsumerPools(self.instruments)
        self.workers = Workers()
        self._housekeeping: HeartbeatExpiry | None = None
        self._clients: RemoteClientManager | None = None
        self._admin: AdminServer | None = None
        self._closed = threading.Event()

    @property
    def port(self) -> int:
        assert self.server is not None, "the node is not started"
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.config.advertised_host}:{self.port}"

    def start(self) -> Node:
        cfg = self.config
        self.storage = storage = open_storage(cfg)
        storage.inventory.install(INVENTORY_TYPES)
        cache = InventoryCache(storage.inventory, cfg.cache_size, cfg.miss_recheck_s)

        def make_client(node: RemoteNode) -> RemoteClient:
            return SelfRemoteClient(node.address, self.workers)

        # The server binds its port first, so the node knows the address it
        # routes to before any worker is built.
        self.server = GrpcServer(cfg.host, cfg.port, cfg.grpc_workers, cfg.max_message_bytes)
        self._clients = RemoteClientManager(
            StandaloneCluster(self.address), make_client, cfg.remote_refresh_interval_s
        )
        processor = InventoryStreamProcessor(
            cfg,
            storage.inventory,
            storage.sequences,
            self.pools,
            self.workers,
            self._clients,
            self.instruments,
            on_stored=cache.learn,  # this node's L2 tells its receiver of new ids at once
        )
        self.server.add_agent_services(
            Registrar(
                cache, processor.entry, Limits(cfg.max_name_length, cfg.max_batch_items, cfg.resend_after_s)
            )
        )
        self._clients.start()
        self.pools.start()
        if cfg.role.is_target:
            self._housekeeping = HeartbeatExpiry(
                storage.inventory, cfg.heartbeat_expiry_s, cfg.housekeeping_interval_s
            )
            self._housekeeping.start()
        if cfg.admin_port >= 0:
            self._admin = AdminServer(cfg.host, cfg.admin_port, self.instruments)
            self._admin.start()
        self.server.start()
        log.info(
            "node started: role=%s grpc=%s storage=%s%s",
            cfg.role.value,
            self.address,
            cfg.storage.value,
            f" admin=http://{cfg.host}:{self._admin.port}/metrics" if self._admin else "",
        )
        return self

    @property
    def admin_port(self) -> int | None:
        return self._admin.port if self._admin else None

    def close(self, grace_s: float = 5.0) -> None:
        """Stops taking calls, drains the chains in order (L1 into L2, L2 into
        storage), then closes storage. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self.server is not None:
            self.server.stop(grace_s)
        if self._housekeeping is not None:
            self._housekeeping.close()
        for name in (L1_POOL, L2_POOL):
            with contextlib.suppress(KeyError):  # an aggregator has no L1 pool
                self.pools.get(name).close(grace_s)
        if self._clients is not None:
            self._clients.close()
        if self._admin is not None:
            self._admin.close()
        if self.storage is not None:
            self.storage.close()
        log.info("node stopped")

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
