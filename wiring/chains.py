"""The stream processors: each builds its types' worker chains, as far as the
node's role needs them (a receiver has L1 and the remote worker, an aggregator
has L2, a mixed node has all):

    inventory  DistinctWorker (L1) -> RemoteWorker (forever-first) -> InventoryPersistentWorker (L2)
    metrics    MetricsAggregateWorker (L1) -> RemoteWorker (hash) -> MetricsPersistentWorker (L2)
    record     RecordPersistentWorker, on the node that received the record

A node closes them in two steps: every processor's L1 first (which hands its
last items on), then every L2 (which stores them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aggregator.metrics import MetricsPersistentWorker
from aggregator.persistent import InventoryPersistentWorker
from aggregator.publish import TopicPublisher
from aggregator.records import RecordPersistentWorker
from model.inventory import INVENTORY_TYPES, Inventory
from model.metrics import METRICS_TYPES, Metrics
from model.records import RECORD_TYPES, Record
from model.stream import Stage, worker_id
from receiver.aggregate import MetricsAggregateWorker
from receiver.distinct import DistinctWorker
from remote.selector import SelectorKind
from remote.sender import RemoteSender
from remote.worker import RemoteWorker
from runtime.buffer import BufferSpec
from runtime.instruments import Instruments
from runtime.periodic import Periodic
from runtime.pools import DrainPools
from runtime.worker import Worker, Workers
from storage.api import InventoryDAO, MetricsDAO, RecordDAO, SequenceAllocator
from wiring.config import NodeConfig

L1_POOL = "REGISTER_L1"
L2_POOL = "REGISTER_L2"
METRICS_L1_POOL = "METRICS_L1"
METRICS_L2_POOL = "METRICS_L2"
RECORD_POOL = "RECORD_PERSIST"


class StreamProcessor(Protocol):
    def start(self) -> None: ...

    def close_l1(self, grace_s: float) -> None:
        """Stops taking items and hands on what L1 holds."""

    def close_l2(self, grace_s: float) -> None:
        """Stores what L2 holds; called after every processor's ``close_l1``."""


def l1_buffer(config: NodeConfig) -> BufferSpec:
    return BufferSpec(
        config.workers.l1_channels,
        config.workers.l1_buffer_size,
        config.workers.l1_strategy,
        config.workers.l1_max_wait_s,
    )


def l2_buffer(config: NodeConfig) -> BufferSpec:
    return BufferSpec(config.workers.l2_channels, config.workers.l2_buffer_size, config.workers.l2_strategy)


def _close_pool(pools: DrainPools, name: str, grace_s: float) -> None:
    if name in pools:
        pools.get(name).close(grace_s)


class InventoryStreamProcessor:
    def __init__(
        self,
        config: NodeConfig,
        dao: InventoryDAO,
        sequences: SequenceAllocator,
        pools: DrainPools,
        workers: Workers,
        sender: RemoteSender | None,
        instruments: Instruments,
        selector: SelectorKind = SelectorKind.FOREVER_FIRST,
        on_stored: Callable[[type[Inventory], list[Inventory]], None] | None = None,
        publisher: TopicPublisher | None = None,
    ) -> None:
        """``selector`` defaults to forever-first: every new name goes to one
        node, so one writer allocates each scope's sequences. ``on_stored`` hears
        of every row L2 inserts. An aggregator has no L1 and needs no ``sender``."""
        self._entries: dict[type[Inventory], Worker[Inventory]] = {}
        for model in INVENTORY_TYPES:
            if config.cluster.role.is_target:
                workers.register(
                    InventoryPersistentWorker(
                        worker_id(model, Stage.L2),
                        f"{model.MODEL}_l2",
                        model,
                        dao,
                        sequences,
                        pools.get_or_create(L2_POOL, config.workers.l2_pool_size),
                        instruments,
                        l2_buffer(config),
                        flush_every=config.workers.l2_batch_size,
                        on_stored=on_stored,
                        publisher=publisher,
                    )
                )
            if not config.cluster.role.takes_agents:
                continue
            assert sender is not None, "a node that takes agent traffic routes L1 results"
            remote: RemoteWorker[Inventory] = RemoteWorker(
                worker_id(model, Stage.REMOTE),
                f"{model.MODEL}_remote",
                worker_id(model, Stage.L2),
                sender,
                selector.build(),
            )
            workers.register(remote)
            l1: DistinctWorker[Inventory] = DistinctWorker(
                worker_id(model, Stage.L1),
                f"{model.MODEL}_l1",
                remote,
                pools.get_or_create(L1_POOL, config.workers.l1_pool_size),
                instruments,
                l1_buffer(config),
            )
            workers.register(l1)
            self._entries[model] = l1
        self._pools = pools

    def entry(self, model: type[Inventory]) -> Worker[Inventory]:
        """The first worker of ``model``'s chain on this node."""
        return self._entries[model]

    def start(self) -> None:
        pass  # the node starts the drain pools

    def close_l1(self, grace_s: float) -> None:
        _close_pool(self._pools, L1_POOL, grace_s)

    def close_l2(self, grace_s: float) -> None:
        _close_pool(self._pools, L2_POOL, grace_s)


class MetricsStreamProcessor:
    """Routes by hash of each metric's entity, so that one aggregator merges an
    entity's minutes, hours and days and no two nodes race on its rows."""

    def __init__(
        self,
        config: NodeConfig,
        dao: MetricsDAO,
        pools: DrainPools,
        workers: Workers,
        sender: RemoteSender | None,
        instruments: Instruments,
        publisher: TopicPublisher | None = None,
    ) -> None:
        self._pools = pools
        self._entries: dict[type[Metrics], Worker[Metrics]] = {}
        self._l1: list[MetricsAggregateWorker] = []
        self._l2: list[MetricsPersistentWorker] = []
        for model in METRICS_TYPES:
            if config.cluster.role.is_target:
                l2 = MetricsPersistentWorker(
                    worker_id(model, Stage.L2),
                    f"{model.MODEL}_l2",
                    model,
                    dao,
                    pools.get_or_create(METRICS_L2_POOL, config.workers.l2_pool_size),
                    instruments,
                    l2_buffer(config),
                    config.workers.metrics_max_pending,
                    publisher,
                )
                workers.register(l2)
                self._l2.append(l2)
            if not config.cluster.role.takes_agents:
                continue
            assert sender is not None, "a node that takes agent traffic routes L1 results"
            remote: RemoteWorker[Metrics] = RemoteWorker(
                worker_id(model, Stage.REMOTE),
                f"{model.MODEL}_remote",
                worker_id(model, Stage.L2),
                sender,
                SelectorKind.HASH.build(),
            )
            workers.register(remote)
            l1 = MetricsAggregateWorker(
                worker_id(model, Stage.L1),
                f"{model.MODEL}_l1",
                remote,
                pools.get_or_create(METRICS_L1_POOL, config.workers.l1_pool_size),
                instruments,
                l1_buffer(config),
                config.workers.metrics_l1_flush_period_s,
            )
            workers.register(l1)
            self._l1.append(l1)
            self._entries[model] = l1
        self._flush = Periodic(
            "metrics-l1-flush",
            config.workers.metrics_l1_flush_period_s,
            self._flush_l1,
            "handing on L1 metrics",
        )
        self._persist = Periodic(
            "metrics-persist",
            config.workers.metrics_persist_interval_s,
            self._persist_l2,
            "persisting metrics",
        )

    def entry(self, model: type[Metrics]) -> Worker[Metrics]:
        return self._entries[model]

    def _flush_l1(self) -> None:
        for w in self._l1:
            w.flush(due_only=True)

    def _persist_l2(self) -> None:
        for w in self._l2:
            w.persist()

    def start(self) -> None:
        if self._l1:
            self._flush.start()
        if self._l2:
            self._persist.start()

    def close_l1(self, grace_s: float) -> None:
        self._flush.close()
        _close_pool(self._pools, METRICS_L1_POOL, grace_s)
        for w in self._l1:
            w.flush()

    def close_l2(self, grace_s: float) -> None:
        self._persist.close()
        _close_pool(self._pools, METRICS_L2_POOL, grace_s)
        self._persist_l2()


class RecordStreamProcessor:
    def __init__(
        self,
        config: NodeConfig,
        dao: RecordDAO,
        pools: DrainPools,
        workers: Workers,
        instruments: Instruments,
        publisher: TopicPublisher | None = None,
    ) -> None:
        self._pools = pools
        self._entries: dict[type[Record], RecordPersistentWorker] = {}
        if not config.cluster.role.takes_agents:
            return
        for model in RECORD_TYPES:
            worker = RecordPersistentWorker(
                worker_id(model, Stage.L2),
                f"{model.MODEL}_records",
                model,
                dao,
                pools.get_or_create(RECORD_POOL, config.workers.record_pool_size),
                instruments,
                BufferSpec(
                    1,
                    config.workers.record_buffer_size,
                    config.workers.l1_strategy,
                    config.workers.l1_max_wait_s,
                ),
                config.workers.record_bulk_size,
                publisher,
            )
            workers.register(worker)
            self._entries[model] = worker

    def entry(self, model: type[Record]) -> Worker[Record]:
        return self._entries[model]

    def start(self) -> None:
        pass

    def close_l1(self, grace_s: float) -> None:
        pass

    def close_l2(self, grace_s: float) -> None:
        for w in self._entries.values():
            w.close()
        _close_pool(self._pools, RECORD_POOL, grace_s)
