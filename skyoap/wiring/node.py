"""A node: storage, worker chains, remote clients and servers assembled for its role."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from skyoap.aggregator.housekeeping import HeartbeatExpiry, TimeToLive, TopicRetention
from skyoap.aggregator.topics import Topics
from skyoap.alarm.delivery import Delivery
from skyoap.alarm.reload import SettingsFile
from skyoap.alarm.rounds import Alarms, AlarmStorage, Membership
from skyoap.consumer.lag import LagCollector, lags
from skyoap.edge.auth import AgentToken, ClusterSecret, RequiredMetadata, SendingClusterSecret
from skyoap.edge.limits import CallLimits
from skyoap.edge.server import GrpcServer
from skyoap.edge.tls import ClientTls, HttpsTls, ServerTls
from skyoap.model.inventory import (
    INVENTORY_TYPES,
    EndpointInventory,
    Inventory,
    ServiceInstanceInventory,
    ServiceInventory,
)
from skyoap.model.metrics import METRICS_TYPES
from skyoap.model.records import RECORD_TYPES
from skyoap.model.stream import StreamTypes
from skyoap.model.topics import Retention, Topic
from skyoap.query.auth import HttpAuth
from skyoap.query.connections import ConnectionLimits
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution
from skyoap.query.promql.api import PromQLApi
from skyoap.query.resolvers import resolvers
from skyoap.query.server import QueryServer
from skyoap.query.status import cluster_page, config_page, ttl_page
from skyoap.receiver import sampling
from skyoap.receiver.aliases import AliasCache
from skyoap.receiver.cache import InventoryCache
from skyoap.receiver.cardinality import Cardinality, GroupingRules, NameBound, seed_from, services_from
from skyoap.receiver.intake import Intake, Sinks
from skyoap.receiver.otlp import add_otlp_services
from skyoap.receiver.profiling import ProfileTasks
from skyoap.receiver.registration import Limits, NamesByService, Registrar
from skyoap.receiver.services import add_agent_services
from skyoap.receiver.skywalking import add_skywalking_services
from skyoap.remote.client import RemoteClient, SelfRemoteClient
from skyoap.remote.cluster import (
    ClusterNodesQuery,
    Member,
    RedisCluster,
    RemoteNode,
    Role,
    StandaloneCluster,
    new_incarnation,
)
from skyoap.remote.grpc_client import GrpcRemoteClient
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.sender import RemoteSender
from skyoap.remote.service import add_remote_service
from skyoap.runtime import admin, descriptors
from skyoap.runtime.admin import AdminServer
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.config import effective
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.lifecycle import Component, Lifecycle, OnClose
from skyoap.runtime.malloc import TRIM_INTERVAL_S, report_allocator, trim_allocator
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.ratelimit import RateLimitedLog
from skyoap.runtime.retry import STORAGE_WRITES
from skyoap.runtime.spill import SpillDir
from skyoap.runtime.watched import WatchedFile
from skyoap.runtime.worker import Workers
from skyoap.storage.api import InventoryDAO
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.wiring.chains import (
    InventoryStreamProcessor,
    MetricsStreamProcessor,
    RecordStreamProcessor,
)
from skyoap.wiring.config import ClusterKind, NodeConfig
from skyoap.wiring.overview import overview_page

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
        self._sender: RemoteSender | None = None
        self._lifecycle = Lifecycle()
        c = config.cluster
        self._client_tls = ClientTls(c.cluster_ca, c.cluster_cert, c.cluster_key) if c.cluster_ca else None
        groups = config.limits.endpoint_groups
        self._groups = GroupingRules.load(groups) if groups else GroupingRules()
        self._apdex = config.analysis.apdex()  # the file is read once, here
        self._ttl = config.ttl.ttl()
        self._closed = threading.Event()
        self._unanswered = RateLimitedLog(log)
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
        cfg, role = self.config, self.config.cluster.role
        yield Periodic("allocator-trim", TRIM_INTERVAL_S, trim_allocator, "trimming the allocator's arenas")
        self.storage = storage = open_storage(cfg.storage)
        yield OnClose(storage.close)
        STORAGE_WRITES.call(lambda: self._install(storage))  # a busy server is asked again
        topics = self._topics(storage)
        if topics is not None:
            yield topics  # closes after the workers drain, with a last round
        # The servers bind their ports first, so the node knows the addresses it
        # registers and routes under before anything is built on them.
        self.server, self.internal = self._servers()
        if cfg.server.admin_port >= 0:
            if self.process in (None, 0):  # every consumer group's lag, read from storage when scraped
                self.instruments.registry.register(LagCollector(lambda: lags(storage.topics, storage.state)))
            self._admin = AdminServer(cfg.server.admin_host, cfg.server.admin_port, self.instruments)
            yield self._admin
        cluster = self._cluster()
        clients = self._remote_clients(cluster) if role.takes_agents else None
        # What an agent's call reads, it reads within the call's deadline.
        edge_reads = storage.inventory_within(cfg.limits.call_deadline_s)
        w = cfg.workers
        cache = InventoryCache(edge_reads, w.cache_size, w.miss_recheck_s, w.cache_max_age_s)
        chains = self._chains(storage, cache, topics)
        yield from self._stages(chains, clients)
        if role.is_target:
            yield from self._housekeeping(storage, topics, cluster)
        if role.takes_agents:
            inventory, metrics, records = chains
            yield from self._agent_services(cache, edge_reads, inventory, metrics, records)
        if cfg.query.enabled:
            yield self._query_server(storage, cluster)
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

    def _stages(
        self,
        chains: tuple[InventoryStreamProcessor, MetricsStreamProcessor, RecordStreamProcessor],
        clients: RemoteClientManager | None,
    ) -> Iterator[Component]:
        """The workers of ``chains`` and what connects them, each started
        before what hands it work: L2, then the remote ``clients`` (on a role
        that takes agents), then L1; and the service other nodes send L2's
        work to."""
        cfg = self.config
        yield from (c.l2 for c in chains if c.l2 is not None)
        if clients is not None:
            assert self._sender is not None
            yield self._sender
            yield clients  # each client sends what it holds before it goes
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

    def _query_server(self, storage: OpenStorage, cluster: RedisCluster | StandaloneCluster) -> QueryServer:
        """SkyWalking's query protocol over what storage holds, on every role
        (each reads the storage its cluster shares)."""
        q = self.config.query
        # What a query reads, it reads within the query's deadline.
        context = QueryContext(
            storage.inventory_within(q.deadline_s),
            storage.metrics,
            storage.records,
            self.config.ttl.as_read(),
            storage.state,
        )
        execution = Execution(
            resolvers(),
            context,
            q.threads,
            q.max_waiting,
            q.deadline_s,
            q.max_depth,
            max_fields=q.max_fields,
            max_tokens=q.max_tokens,
            max_answer_bytes=q.max_answer_bytes,
        )
        tls = HttpsTls(q.tls_cert, q.tls_key) if q.tls_cert else None
        auth = HttpAuth(q.username, q.password, q.token) if q.username or q.token else None
        status = {
            "/status/config/ttl": ttl_page(context.ttl),
            "/status/cluster/nodes": cluster_page(
                lambda: [(n.address, n.is_self) for n in cluster.remote_nodes()]
            ),
            "/status/cluster/overview": overview_page(
                cluster.members, self.name, self.instruments, storage.topics, storage.state
            ),
            "/debugging/config/dump": config_page(effective(self.config)),
        }
        self._query = QueryServer(
            q.host,
            q.port,
            execution,
            self.instruments,
            q.max_body_bytes,
            tls,
            auth,
            status,
            ConnectionLimits(self._query_connections(), q.max_connections_per_peer, q.header_timeout_s),
            q.idle_timeout_s,
            (q.promql_port, PromQLApi(context, q.max_answer_bytes)) if q.promql_port >= 0 else None,
        )
        return self._query

    def _query_connections(self) -> int:
        """``--query-max-connections``, or fewer when the descriptors free
        now would not leave as many again for agents, storage and the cluster."""
        wanted = self.config.query.max_connections
        held = descriptors.share(wanted, reserved=admin.MOST_CONNECTIONS)
        if held < wanted:
            log.warning(
                "the query port holds at most %d connections, not %d (--query-max-connections): the "
                "process may open %d descriptors (ulimit -n); raise it to hold more",
                held, wanted, descriptors.limit(),
            )  # fmt: skip
        return held

    def _topics(self, storage: OpenStorage) -> Topics | None:
        if not self.config.topics.publish:
            return None
        # A topic keeps the partition count it was created with.
        partitions = {t: len(storage.topics.bounds(t.value)) for t in Topic}
        topics = Topics(
            storage.topics,
            storage.records,
            storage.offsets,
            partitions,
            self.instruments,
            self.config.topics.commit_interval_s,
        )
        self.budget.hold(topics.held)
        return topics

    def _servers(self) -> tuple[GrpcServer, GrpcServer | None]:
        """The agents' server and, for the targets of a cluster, the internal
        one where other nodes' L1 results come in, with calls bounded apart
        from the agents'."""
        cfg = self.config
        token = AgentToken(cfg.server.auth_token) if cfg.server.auth_token else None
        agent_tls = ServerTls(cfg.server.tls_cert, cfg.server.tls_key) if cfg.server.tls_cert else None
        server = self._server(cfg.server.port, token, agent_tls, reuse_port=self.process is not None)
        if not (cfg.cluster.role.is_target and cfg.cluster.kind is ClusterKind.REDIS):
            return server, None
        c = cfg.cluster
        cluster_tls = (
            ServerTls(c.cluster_cert, c.cluster_key, client_ca=c.cluster_ca) if c.cluster_ca else None
        )
        # Members only: a certificate of the cluster's CA, the cluster's secret,
        # or both; never the agent token.
        members = ClusterSecret(c.cluster_secret) if c.cluster_secret else None
        return server, self._server(cfg.server.internal_port, members, cluster_tls, reflection=False)

    def _remote_clients(self, cluster: RedisCluster | StandaloneCluster) -> RemoteClientManager:
        """The client set L1 results are routed over (only they travel between nodes)."""
        targets: ClusterNodesQuery = cluster
        if self.config.cluster.role.is_target:
            # As its own membership lists it, so that leaving changes no client.
            identity = self._client_tls.identity if self._client_tls else ""
            internal = self.internal_address or self.address
            me = RemoteNode(self.address, True, internal, identity, self.incarnation)
            targets = _SelfWhenAlone(cluster, me)
        refresh_s = self.config.cluster.remote_refresh_interval_s
        manager = RemoteClientManager(targets, self._make_client, refresh_s)
        self._sender = RemoteSender(manager, self.instruments, self.budget)
        self.instruments.gauge("skyoap_remote_targets", "nodes L1 results go to").set_function(
            lambda: len(manager.clients)
        )
        return manager

    def _chains(
        self, storage: OpenStorage, cache: InventoryCache, topics: Topics | None
    ) -> tuple[InventoryStreamProcessor, MetricsStreamProcessor, RecordStreamProcessor]:
        cfg = self.config
        inventory = InventoryStreamProcessor(
            cfg,
            storage.inventory,
            storage.sequences,
            self.workers,
            self._sender,
            self.instruments,
            selector=cfg.cluster.inventory_selector,
            # A mixed node's L2 tells its own receiver of new ids at once.
            on_stored=cache.learn if cfg.cluster.role is Role.MIXED else None,
            topics=topics,
        )
        spill = SpillDir(cfg.workers.spill_dir, cfg.storage.identity()) if cfg.workers.spill_dir else None
        metrics = MetricsStreamProcessor(
            cfg, storage.metrics, self.workers, self._sender, self.instruments, self.budget, topics, spill
        )
        records = RecordStreamProcessor(
            cfg, storage.records, self.workers, self.instruments, self.budget, topics, spill
        )
        return inventory, metrics, records

    def _housekeeping(
        self, storage: OpenStorage, topics: Topics | None, cluster: RedisCluster | StandaloneCluster
    ) -> Iterator[Component]:
        """An aggregator's periodic tasks: heartbeat expiry, topic retention, time to live, alarms."""
        cfg = self.config
        interval_s = cfg.workers.housekeeping_interval_s
        yield HeartbeatExpiry(storage.inventory, cfg.workers.heartbeat_expiry_s, interval_s, topics)
        retention = Retention(cfg.topics.retention_s, cfg.topics.retention_records)
        yield TopicRetention(storage.topics, retention, interval_s)
        yield TimeToLive(
            self._ttl,
            storage.inventory,
            storage.metrics,
            storage.topics,
            storage.sequences,
            cfg.ttl.interval_s,
            topics,
        )
        if cfg.alarm.settings:
            yield from self._alarms(storage, topics, cluster)

    def _alarms(
        self, storage: OpenStorage, topics: Topics | None, cluster: RedisCluster | StandaloneCluster
    ) -> Iterator[Component]:
        """Alarm rules evaluated over the entities this aggregator owns, their notices sent."""
        a = self.config.alarm
        settings = SettingsFile(Path(a.settings), self.instruments, a.reload_s)
        yield settings
        delivery = Delivery(self.instruments, a.max_queued, a.hook_timeout_s)
        yield delivery  # closes after the evaluation: the last notices are sent

        def nodes() -> list[str]:
            return [n.address for n in cluster.remote_nodes()]

        yield Alarms(
            settings,
            AlarmStorage(storage.metrics, storage.state, storage.records, topics),
            Membership(self.address, nodes),
            delivery,
            self.instruments,
            a.settle_s,
        )

    def _agent_services(
        self,
        cache: InventoryCache,
        edge_reads: InventoryDAO,
        inventory: InventoryStreamProcessor,
        metrics: MetricsStreamProcessor,
        records: RecordStreamProcessor,
    ) -> Iterator[Component]:
        """A receiver's services on the agents' server: registration, SkyWalking's v3, OTLP."""
        cfg = self.config
        assert self.server is not None and self.storage is not None
        limits = Limits(
            cfg.limits.max_name_length,
            cfg.limits.max_batch_items,
            cfg.limits.max_properties_chars,
            cfg.workers.resend_after_s,
        )
        cardinality = self._cardinality(cache, edge_reads)
        registrar = Registrar(cache, inventory.entry, limits, cardinality)
        add_agent_services(self.server, registrar)
        sinks = Sinks(metrics.entry, records.entry, self.budget, cfg.limits.call_deadline_s)
        names = NamesByService(registrar)
        intake = Intake(
            names, sinks, cfg.limits.items(), cardinality, self.instruments, cfg.analysis.log_tags()
        )
        aliases = AliasCache(
            self.storage.metrics,
            cfg.limits.max_network_addresses,
            cfg.analysis.alias_refresh_s,
            self.instruments,
        )
        a = cfg.analysis
        tasks = ProfileTasks(self.storage.state)
        sampler = None
        if a.trace_sampling_settings:
            policies = WatchedFile(
                Path(a.trace_sampling_settings),
                sampling.load,
                self.instruments,
                a.trace_sampling_reload_s,
                ("skyoap_trace_sampling_settings_errors_total", "sampling settings refused when read again"),
                sampling.Policies.describe,
            )
            sampler = sampling.Sampler(policies, self.instruments, tasks.of)
            yield policies
        segments = add_skywalking_services(
            self.server, intake, tasks, aliases, self._apdex, a.searchable_tags(), a.slow(), sampler
        )
        yield aliases  # read from storage before the first call: aliases survive restarts
        yield names
        yield add_otlp_services(self.server, segments, intake, cfg.analysis.otlp_caller_wait_s)

    def _server(
        self,
        port: int,
        token: RequiredMetadata | None,
        tls: ServerTls | None,
        reflection: bool = True,
        reuse_port: bool = False,
    ) -> GrpcServer:
        cfg = self.config
        return GrpcServer(
            cfg.server.host,
            port,
            cfg.server.max_message_bytes,
            cfg.limits.call_deadline_s,
            CallLimits(
                cfg.server.max_concurrent_calls, cfg.server.stream_idle_s, cfg.server.stream_max_age_s
            ),
            token,
            tls,
            reflection,
            self.budget,
            cfg.server.max_control_message_bytes,
            reuse_port,
        )

    def _cardinality(self, cache: InventoryCache, reads: InventoryDAO) -> Cardinality:
        lim = self.config.limits

        def service_id(name: str) -> int | None:
            return cache.ids(ServiceInventory, [name]).get(name)

        def per_service(kind: str, most: int, model: type[Inventory]) -> NameBound:
            seed = seed_from(reads.names_of_service, service_id, model, most)
            return NameBound(kind, most, f"--max-{kind}s-per-service", self.instruments, seed)

        return Cardinality(
            self._groups,
            per_service("endpoint", lim.max_endpoints_per_service, EndpointInventory),
            per_service("instance", lim.max_instances_per_service, ServiceInstanceInventory),
            NameBound(
                "network address", lim.max_network_addresses, "--max-network-addresses", self.instruments
            ),
            NameBound(
                "service",
                lim.max_services,
                "--max-services",
                self.instruments,
                services_from(reads.list, lim.max_services),
            ),
        )

    def _install(self, storage: OpenStorage) -> None:
        """Creates what is missing of the indices, tables and topics (each step
        leaves what exists as it is, so it can be run again)."""
        storage.inventory.install(INVENTORY_TYPES)
        storage.metrics.install(METRICS_TYPES)
        storage.records.install(RECORD_TYPES)
        storage.topics.install({t.value: self.config.topics.partitions for t in Topic})

    def _cluster(self) -> RedisCluster | StandaloneCluster:
        cfg = self.config
        host = cfg.server.advertised_host
        admin = f"{host}:{self._admin.port}" if self._admin else ""
        internal = self.internal_address or ""
        identity = self._client_tls.identity if self._client_tls else ""
        me = Member(
            self.name,
            cfg.cluster.role.value,
            self.address,
            time.time(),
            admin,
            internal,
            identity,
            self.incarnation,
        )
        if cfg.cluster.kind is ClusterKind.STANDALONE:
            return StandaloneCluster(me)
        return RedisCluster(
            cfg.storage.redis_url,
            cfg.storage.redis_key_prefix,
            me,
            cfg.cluster.heartbeat_s,
            cfg.cluster.expiry_s,
            require_identity=self._client_tls is not None,
            ca=cfg.storage.redis_ca,
        )

    def _make_client(self, node: RemoteNode) -> RemoteClient | None:
        """A client for ``node``, or None until it answers over its channel
        (with cluster TLS, only as the identity its membership names)."""
        if node.is_self:
            return SelfRemoteClient(node.address, self.workers)
        assert self._sender is not None
        if self._client_tls is not None:
            channel = self._client_tls.channel(node.internal, node.identity)
        else:
            channel = grpc.insecure_channel(node.internal)
        if self.config.cluster.cluster_secret:
            channel = grpc.intercept_channel(
                channel, SendingClusterSecret(self.config.cluster.cluster_secret)
            )
        client = GrpcRemoteClient(
            node.address,
            self.instruments,
            self.config.cluster.remote_buffer_size,
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
