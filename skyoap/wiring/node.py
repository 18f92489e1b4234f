"""A node: storage, worker chains, remote clients and servers assembled for its
role. Each package builds its own parts from its section of the configuration
(``*/assembly.py``); the node composes them in start order."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Iterator

from skyoap.aggregator.assembly import housekeeping, publishing
from skyoap.aggregator.topics import Topics
from skyoap.alarm.assembly import alarms
from skyoap.consumer.lag import LagCollector, lags
from skyoap.edge.admin import AdminServer
from skyoap.edge.assembly import agent_server
from skyoap.edge.server import GrpcServer
from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import METRICS_TYPES
from skyoap.model.stream import StreamTypes
from skyoap.query.assembly import query_endpoint
from skyoap.query.server import QueryServer
from skyoap.query.status import StatusPage, cluster_page, config_page
from skyoap.receiver.assembly import Handed, receiver
from skyoap.receiver.cache import InventoryCache
from skyoap.receiver.intake import Sinks
from skyoap.remote.assembly import Peers
from skyoap.remote.cluster import Member, RedisCluster, RemoteNode, Role, StandaloneCluster, new_incarnation
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.sender import RemoteSender
from skyoap.remote.service import add_remote_service
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.config import effective
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.lifecycle import Component, Lifecycle, OnClose
from skyoap.runtime.malloc import TRIM_INTERVAL_S, report_allocator, trim_allocator
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.retry import STORAGE_WRITES
from skyoap.runtime.spill import SpillDir
from skyoap.runtime.worker import Workers
from skyoap.storage.api import InventoryDAO
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.wiring.chains import (
    InventoryStreamProcessor,
    MetricsStreamProcessor,
    RecordStreamProcessor,
)
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.overview import overview_page

log = logging.getLogger(__name__)

Cluster = RedisCluster | StandaloneCluster

Chains = tuple[InventoryStreamProcessor, MetricsStreamProcessor, RecordStreamProcessor]
Route = tuple[RemoteSender, RemoteClientManager]


class Node:
    """A node of one role. ``start`` builds and starts its components in order
    (storage, admin, L2, the remote clients, L1, the agent services, the query
    endpoint, the server, the cluster), and ``close`` closes them in the
    reverse order.

    ``process`` is which of the node's worker processes this one is
    (``--workers``; None: the node is one process). Each worker is a node of
    its own in the cluster, on the agent port they share: its address, its
    name in routing, is the port's followed by ``/PROCESS``."""

    def __init__(self, config: NodeConfig, process: int | None = None) -> None:
        config.check()
        self.config = config
        self.process = process
        self.instruments = Instruments()
        self.budget = MemoryBudget(config.limits.memory_limit_mb * 1024 * 1024, self.instruments)
        report_allocator(self.instruments)
        self.storage: OpenStorage | None = None
        self.server: GrpcServer | None = None
        self.internal: GrpcServer | None = None
        """The RemoteService's own server (targets of a cluster only)."""
        self.workers = Workers()
        self._admin: AdminServer | None = None
        self._query: QueryServer | None = None
        self._peers = Peers(config.cluster, self.workers, self.instruments)
        self._lifecycle = Lifecycle()
        self._closed = threading.Event()
        self.incarnation = new_incarnation()
        """This run of the node, in its membership record and its RemoteService's acks."""

    @property
    def port(self) -> int:
        assert self.server is not None, "the node is not started"
        return self.server.port

    @property
    def address(self) -> str:
        where = f"{self.config.server.advertised_host}:{self.port}"
        return where if self.process is None else f"{where}/{self.process}"

    @property
    def internal_address(self) -> str | None:
        """Where other nodes send this node L1 results, if it takes them."""
        return f"{self.config.server.advertised_host}:{self.internal.port}" if self.internal else None

    @property
    def name(self) -> str:
        where = self.address if self.server is not None else "(not started)"
        named = self.config.cluster.node_name
        if named and self.process is not None:
            return f"{named}/{self.process}"
        return named or f"{self.config.cluster.role.value}@{where}"

    @property
    def admin_port(self) -> int | None:
        return self._admin.port if self._admin else None

    @property
    def admin_host(self) -> str | None:
        """The address the admin server is bound to."""
        return self._admin.host if self._admin else None

    @property
    def query_port(self) -> int | None:
        """The port of the query endpoint (None when ``--query-port -1`` turns it off)."""
        return self._query.port if self._query else None

    @property
    def query_host(self) -> str | None:
        """The address the query endpoint is bound to."""
        return self._query.host if self._query else None

    @property
    def query_url(self) -> str | None:
        """Where the query endpoint answers, as clients reach it (``--advertised-host``)."""
        if self._query is None:
            return None
        return f"{self._query.scheme}://{self.config.server.advertised_host}:{self._query.port}/graphql"

    @property
    def promql_url(self) -> str | None:
        """Where the PromQL service answers (``--promql-port``), as clients reach it."""
        if self._query is None or self._query.promql_port is None:
            return None
        return f"{self._query.scheme}://{self.config.server.advertised_host}:{self._query.promql_port}"

    @property
    def ui_url(self) -> str | None:
        """Where the web UI the query endpoint serves opens."""
        return self.query_url.removesuffix("graphql") if self.query_url else None

    def start(self) -> Node:
        """Builds and starts everything; on failure, closes what was started and
        releases the server's port."""
        try:
            return self._start()
        except BaseException:
            self.close(grace_s=0)
            for server in (self.server, self.internal):  # bound at once, in the lifecycle once started
                if server is not None:
                    server.close(0)
            raise

    def _start(self) -> Node:
        for part in self._parts():
            self._lifecycle.start(part)
        cfg = self.config
        log.info(
            "node %s started: role=%s grpc=%s storage=%s cluster=%s%s%s",
            self.name,
            cfg.cluster.role.value,
            self.address,
            cfg.storage.kind.value,
            cfg.cluster.kind.value,
            f" admin=http://{self._admin.host}:{self._admin.port}/metrics" if self._admin else "",
            f" query={self._query.url}" if self._query else "",
        )
        return self

    def _parts(self) -> Iterator[Component]:
        """The node's components in start order, each started before the next
        is built (a later one may need what an earlier one bound); closing
        runs in the reverse order: what opens the node to traffic starts last
        and closes first, storage starts first and closes last."""
        cfg, role, w = self.config, self.config.cluster.role, self.config.workers
        deadline_s = cfg.limits.call_deadline_s
        yield Periodic("allocator-trim", TRIM_INTERVAL_S, trim_allocator, "trimming the allocator's arenas")
        self.storage = storage = open_storage(cfg.storage)
        yield OnClose(storage.close)
        STORAGE_WRITES.call(lambda: storage.install(cfg.topics.partitions))  # a busy server is asked again
        topics = publishing(cfg.topics, storage, self.instruments, self.budget)
        if topics is not None:
            yield topics  # closes after the workers drain, with a last round
        # The servers bind their ports first, so the node knows the addresses it
        # registers and routes under before anything is built on them.
        self.server = agent_server(cfg.server, deadline_s, self.budget, reuse_port=self.process is not None)
        self.internal = self._peers.internal_server(cfg.server, deadline_s, self.budget)
        yield from self._admin_server(storage)
        cluster = self._peers.membership(cfg.storage, self._member())
        route = self._peers.route(cluster, self._me(), self.budget) if role.takes_agents else None
        # What an agent's call reads, it reads within the call's deadline.
        edge_reads = storage.inventory_within(deadline_s)
        cache = InventoryCache(edge_reads, w.cache_size, w.miss_recheck_s, w.cache_max_age_s)
        chains = self._chains(storage, cache, topics, route[0] if route else None)
        yield from self._stages(chains, route)
        if role.is_target:
            yield from housekeeping(
                cfg.topics, cfg.ttl, w.heartbeat_expiry_s, w.housekeeping_interval_s, storage, topics
            )
            nodes = lambda: [n.address for n in cluster.remote_nodes()]  # noqa: E731
            yield from alarms(cfg.alarm, storage, topics, self.address, nodes, self.instruments)
        if role.takes_agents:
            yield from receiver(
                cfg.limits, cfg.analysis, self._handed(storage, cache, edge_reads, chains, cluster)
            )
        if cfg.query.enabled:
            pages = self._status_pages(storage, cluster)
            self._query = query_endpoint(cfg.query, storage, cfg.ttl.ttl(), self.instruments, pages)
            yield self._query
        yield self.server
        if self.internal is not None:
            yield self.internal
            yield OnClose(self.internal.refuse)
        if isinstance(cluster, RedisCluster) and role.is_target:
            # After leaving, an aggregator serves on until every receiver's next
            # refresh has routed elsewhere.
            reroute_s = cfg.cluster.remote_refresh_interval_s + 0.5
            yield OnClose(lambda: time.sleep(reroute_s))
        yield cluster  # only now: other nodes may route to us from here on
        yield OnClose(self.server.refuse)  # NOT_SERVING to health checks before anything else

    def _admin_server(self, storage: OpenStorage) -> Iterator[Component]:
        """``/metrics`` and ``/healthz`` on ``--admin-port``, if it is on."""
        s = self.config.server
        if s.admin_port < 0:
            return
        if self.process in (None, 0):  # every consumer group's lag, read from storage when scraped
            self.instruments.registry.register(LagCollector(lambda: lags(storage.topics, storage.state)))
        self._admin = AdminServer(s.admin_host, s.admin_port, self.instruments)
        yield self._admin

    def _member(self) -> Member:
        """This node as its cluster lists it."""
        admin = f"{self.config.server.advertised_host}:{self._admin.port}" if self._admin else ""
        return Member(
            self.name,
            self.config.cluster.role.value,
            self.address,
            time.time(),
            admin,
            self.internal_address or "",
            self._peers.identity,
            self.incarnation,
        )

    def _me(self) -> RemoteNode:
        """This node as a target of L1 results, as its membership lists it."""
        internal = self.internal_address or self.address
        return RemoteNode(self.address, True, internal, self._peers.identity, self.incarnation)

    def _stages(self, chains: Chains, route: Route | None) -> Iterator[Component]:
        """The workers of ``chains`` and what connects them, each started
        before what hands it work: L2, then the ``route`` of a role that takes
        agents (the sender, then its clients), then L1; and the service other
        nodes send L2's work to."""
        cfg = self.config
        yield from (c.l2 for c in chains if c.l2 is not None)
        if route is not None:
            yield from route  # each client sends what it holds before it goes
        yield from (c.l1 for c in chains if c.l1 is not None)
        if self.internal is not None:
            add_remote_service(
                self.internal,
                self.workers,
                StreamTypes((*INVENTORY_TYPES, *METRICS_TYPES)),
                self.instruments,
                self.budget,
                cfg.limits.call_deadline_s,
                cfg.limits.items(),
                self.incarnation,
            )

    def _chains(
        self, storage: OpenStorage, cache: InventoryCache, topics: Topics | None, sender: RemoteSender | None
    ) -> Chains:
        cfg = self.config
        inventory = InventoryStreamProcessor(
            cfg,
            storage.inventory,
            storage.sequences,
            self.workers,
            sender,
            self.instruments,
            selector=cfg.cluster.inventory_selector,
            # A mixed node's L2 tells its own receiver of new ids at once.
            on_stored=cache.learn if cfg.cluster.role is Role.MIXED else None,
            topics=topics,
        )
        spill = SpillDir(cfg.workers.spill_dir, cfg.storage.identity()) if cfg.workers.spill_dir else None
        metrics = MetricsStreamProcessor(
            cfg, storage.metrics, self.workers, sender, self.instruments, self.budget, topics, spill
        )
        records = RecordStreamProcessor(
            cfg, storage.records, self.workers, self.instruments, self.budget, topics, spill
        )
        return inventory, metrics, records

    def _handed(
        self, storage: OpenStorage, cache: InventoryCache, reads: InventoryDAO, chains: Chains, nodes: Cluster
    ) -> Handed:
        """What the receiver takes from this node: where its services go and what they feed."""
        assert self.server is not None
        inventory, metrics, records = chains
        sinks = Sinks(metrics.entry, records.entry, self.budget, self.config.limits.call_deadline_s)
        receivers = functools.partial(_receivers, nodes)
        return Handed(
            self.server, storage, cache, reads, inventory.entry, sinks, self.instruments,
            self.config.workers.resend_after_s, self.name, receivers,
        )  # fmt: skip

    def _status_pages(
        self, storage: OpenStorage, cluster: RedisCluster | StandaloneCluster
    ) -> dict[str, StatusPage]:
        """The pages the query endpoint serves of this node and its cluster."""
        return {
            "/status/cluster/nodes": cluster_page(
                lambda: [(n.address, n.is_self) for n in cluster.remote_nodes()]
            ),
            "/status/cluster/overview": overview_page(
                cluster.members, self.name, self.instruments, storage.topics, storage.state
            ),
            "/debugging/config/dump": config_page(effective(self.config)),
        }

    def close(self, grace_s: float = 5.0) -> None:
        """Answers NOT_SERVING to health checks and leaves the cluster (an
        aggregator keeps serving until every receiver's next refresh has routed
        elsewhere); then stops taking calls, drains the chains in order (L1 into
        L2 or other nodes, L2 into storage) and closes storage, each step within
        up to ``grace_s``. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._lifecycle.close(grace_s)
        log.info("node %s stopped (pid %d)", self.name, os.getpid())

    def __enter__(self) -> Node:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _receivers(cluster: Cluster) -> list[str]:
    """The names of the cluster's live nodes that take agents."""
    return [m.name for m in cluster.members() if Role(m.role).takes_agents]
