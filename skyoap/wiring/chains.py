"""The stream processors: each builds its types' worker chains, as far as the
node's role needs them (a receiver has L1 and the remote worker, an aggregator
has L2, a mixed node has all):

    inventory  DistinctWorker (L1) -> RemoteWorker (forever-first) -> InventoryPersistentWorker (L2)
    metrics    MetricsAggregateWorker (L1) -> RemoteWorker (hash) -> MetricsPersistentWorker (L2)
    record     RecordPersistentWorker, on the node that received the record

Each processor's L1 and L2 are components of their own (``l1``, ``l2``): the
drain pool their workers share and the periodic task that flushes them. The
node starts every L2 before any L1 and closes in the reverse order, so L1
hands its last items on while L2 still takes them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from skyoap.aggregator.metrics import LastRound, MetricsPersistentWorker
from skyoap.aggregator.persistent import InventoryPersistentWorker
from skyoap.aggregator.records import RecordPersistentWorker
from skyoap.aggregator.topics import Topics
from skyoap.model.inventory import INVENTORY_TYPES, Inventory
from skyoap.model.metrics import METRICS_TYPES, Metrics
from skyoap.model.records import AGENT_RECORD_TYPES, Record
from skyoap.model.stream import Stage, worker_id
from skyoap.receiver.aggregate import MetricsAggregateWorker
from skyoap.receiver.distinct import DistinctWorker
from skyoap.remote.selector import SelectorKind
from skyoap.remote.sender import RemoteSender
from skyoap.remote.worker import RemoteWorker
from skyoap.runtime.batching import BatchPolicy
from skyoap.runtime.budget import MemoryBudget
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.periodic import Periodic
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.retry import RetryPolicy
from skyoap.runtime.spill import SpillDir
from skyoap.runtime.worker import Worker, Workers
from skyoap.storage.api import InventoryDAO, MetricsDAO, RecordDAO, SequenceAllocator
from skyoap.wiring.config import NodeConfig

log = logging.getLogger(__name__)

CLOSE_RETRY = RetryPolicy(attempts=None, first_delay_s=0.2, multiplier=2.0, max_delay_s=1.0)
"""Pauses between the last rounds of a closing level, within its grace."""

L1_POOL = "REGISTER_L1"
L2_POOL = "REGISTER_L2"
METRICS_L1_POOL = "METRICS_L1"
METRICS_L2_POOL = "METRICS_L2"
RECORD_POOL = "RECORD_PERSIST"
SPILL_RETRY_S = 1.0
"""How often records spilled by an earlier start are looked for, and tried
again while storage does not take them."""


class ChainLevel:
    """One level (L1 or L2) of a processor's chains on this node: the pool its
    workers share and, for metrics, the task that flushes them on a timer.
    ``close`` stops the task, lets the pool drain what is queued within its
    grace, then runs ``give_up`` (stop waiting to retry what storage has not
    taken by then), ``store_again`` (store what the workers hold; True once
    nothing is left) again after pauses while something is left and the grace
    lasts, and last ``after_drain`` (hand on, or spill, what the workers
    still hold)."""

    def __init__(
        self,
        pool: DrainPool,
        task: Periodic | None = None,
        give_up: Sequence[Callable[[], None]] = (),
        after_drain: Sequence[Callable[[], None]] = (),
        store_again: Callable[[], bool] | None = None,
    ) -> None:
        self.pool = pool
        self._task = task
        self._give_up = give_up
        self._after_drain = after_drain
        self._store_again = store_again

    def start(self) -> None:
        self.pool.start()
        if self._task is not None:
            self._task.start()

    def close(self, timeout_s: float) -> None:
        """Within ``timeout_s``, but for the write under way when the tries
        are given up (it ends by its own timeout) and one last pass of
        ``store_again``."""
        ends_at = time.monotonic() + timeout_s

        def left() -> float:
            return max(0.0, ends_at - time.monotonic())

        if self._task is not None:
            self._task.close(left())
        # A write storage did not take at once (a timeout on a busy machine) is
        # tried again for the grace, as in service: stopping loses nothing then.
        self.pool.close(left())
        if self._give_up:
            for step in self._give_up:
                step()
            self.pool.close(timeout_s)  # the tries under way end at once, the write under way by its timeout
        failures = 0
        while self._store_again is not None and not self._store_again():
            failures += 1
            pause = CLOSE_RETRY.delay_s(failures)
            if time.monotonic() + pause >= ends_at:
                log.warning("storage did not take every row in %g s; what is left is spilled", timeout_s)
                break
            time.sleep(pause)
        for step in self._after_drain:
            step()


def l1_buffer(config: NodeConfig) -> BufferSpec:
    """The L1 queues of registration: a full one holds an agent's call up to
    its deadline (agents register again and again until they have ids)."""
    w = config.workers
    return BufferSpec(w.l1_channels, w.l1_buffer_size, w.l1_strategy, config.limits.call_deadline_s)


def admitted_buffer(config: NodeConfig, channels: int) -> BufferSpec:
    """The queues of telemetry: the node's memory budget admits a call whole
    before anything of it is queued, so they take every item."""
    return BufferSpec(channels, config.workers.l1_buffer_size, BufferStrategy.ADMITTED)


def l2_buffer(config: NodeConfig) -> BufferSpec:
    """The L2 queues of registration: a full one holds a batch from another
    node up to the deadline, then refuses it (the sender sends it again)."""
    w = config.workers
    return BufferSpec(w.l2_channels, w.l2_buffer_size, w.l2_strategy, config.limits.call_deadline_s)


class InventoryStreamProcessor:
    def __init__(
        self,
        config: NodeConfig,
        dao: InventoryDAO,
        sequences: SequenceAllocator,
        workers: Workers,
        sender: RemoteSender | None,
        instruments: Instruments,
        selector: SelectorKind = SelectorKind.FOREVER_FIRST,
        on_stored: Callable[[type[Inventory], list[Inventory]], None] | None = None,
        topics: Topics | None = None,
    ) -> None:
        """``selector`` defaults to forever-first: every new name goes to one
        node, so one writer allocates each scope's sequences. ``on_stored`` hears
        of every row L2 inserts. An aggregator has no L1 and needs no ``sender``."""
        role = config.cluster.role
        self._entries: dict[type[Inventory], Worker[Inventory]] = {}
        l2_pool = DrainPool(L2_POOL, config.workers.l2_pool_size, instruments)
        l1_pool = DrainPool(L1_POOL, config.workers.l1_pool_size, instruments)
        self.l2 = ChainLevel(l2_pool) if role.is_target else None
        self.l1 = ChainLevel(l1_pool) if role.takes_agents else None
        for model in INVENTORY_TYPES:
            if role.is_target:
                workers.register(
                    InventoryPersistentWorker(
                        worker_id(model, Stage.L2),
                        f"{model.MODEL}_l2",
                        model,
                        dao,
                        sequences,
                        l2_pool,
                        instruments,
                        l2_buffer(config),
                        batch=BatchPolicy(max_items=config.workers.l2_batch_size),
                        on_stored=on_stored,
                        topics=topics,
                    )
                )
            if not role.takes_agents:
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
                l1_pool,
                instruments,
                l1_buffer(config),
            )
            workers.register(l1)
            self._entries[model] = l1

    def entry(self, model: type[Inventory]) -> Worker[Inventory]:
        """The first worker of ``model``'s chain on this node."""
        return self._entries[model]


class MetricsStreamProcessor:
    """Routes by hash of each metric's entity, so that one aggregator merges an
    entity's minutes, hours and days and no two nodes race on its rows."""

    def __init__(
        self,
        config: NodeConfig,
        dao: MetricsDAO,
        workers: Workers,
        sender: RemoteSender | None,
        instruments: Instruments,
        budget: MemoryBudget,
        topics: Topics | None = None,
        spill_dir: SpillDir | None = None,
    ) -> None:
        role, w = config.cluster.role, config.workers
        self._entries: dict[type[Metrics], Worker[Metrics]] = {}
        self._l1: list[MetricsAggregateWorker] = []
        self._l2: list[MetricsPersistentWorker] = []
        l2_pool = DrainPool(METRICS_L2_POOL, w.l2_pool_size, instruments)
        l1_pool = DrainPool(METRICS_L1_POOL, w.l1_pool_size, instruments)
        for model in METRICS_TYPES:
            if role.is_target:
                l2 = MetricsPersistentWorker(
                    worker_id(model, Stage.L2),
                    f"{model.MODEL}_l2",
                    model,
                    dao,
                    l2_pool,
                    instruments,
                    admitted_buffer(config, w.l2_channels),
                    budget.limit_bytes,
                    topics,
                    spill_dir,
                )
                budget.hold(l2.held)
                workers.register(l2)
                self._l2.append(l2)
            if not role.takes_agents:
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
                l1_pool,
                instruments,
                admitted_buffer(config, w.l1_channels),
                w.metrics_l1_flush_period_s,
            )
            budget.hold(l1.held)
            workers.register(l1)
            self._l1.append(l1)
            self._entries[model] = l1
        self.l2, self.l1 = self._levels(config, l2_pool, l1_pool)

    def _levels(
        self, config: NodeConfig, l2_pool: DrainPool, l1_pool: DrainPool
    ) -> tuple[ChainLevel | None, ChainLevel | None]:
        """L2 and L1 as the node starts and drains them: each pool with its
        periodic round, None for a level the node's role does not run."""
        role, w = config.cluster.role, config.workers
        l2 = (
            ChainLevel(
                l2_pool,
                Periodic(
                    "metrics-persist", w.metrics_persist_interval_s, self._persist_l2, "persisting metrics"
                ),
                store_again=self._persist_l2_held,
                after_drain=[*(worker.interrupt for worker in self._l2), self._last_round],
            )
            if role.is_target
            else None
        )
        l1 = (
            ChainLevel(
                l1_pool,
                Periodic(
                    "metrics-l1-flush", w.metrics_l1_flush_period_s, self._flush_l1, "handing on L1 metrics"
                ),
                after_drain=[self._flush_all_l1],
            )
            if role.takes_agents
            else None
        )
        return l2, l1

    def entry(self, model: type[Metrics]) -> Worker[Metrics]:
        return self._entries[model]

    def _flush_l1(self) -> None:
        for w in self._l1:
            w.flush(due_only=True)

    def _flush_all_l1(self) -> None:
        for w in self._l1:
            w.flush()

    def _persist_l2(self) -> None:
        for w in self._l2:
            w.persist()

    def _persist_l2_held(self) -> bool:
        """Persists what the L2 workers hold, up to the first whose storage
        failed (the others wait for the next try, or for the spill); True
        once every one has stored all it took."""
        return all(w.store_held() for w in self._l2)

    def _last_round(self) -> None:
        last = LastRound()
        for w in self._l2:
            w.persist(last)


class RecordStreamProcessor:
    """Records are stored where they were received: the level is L2, on nodes
    that take agent traffic."""

    def __init__(
        self,
        config: NodeConfig,
        dao: RecordDAO,
        workers: Workers,
        instruments: Instruments,
        budget: MemoryBudget,
        topics: Topics | None = None,
        spill_dir: SpillDir | None = None,
    ) -> None:
        w = config.workers
        self._entries: dict[type[Record], RecordPersistentWorker] = {}
        self.l1: ChainLevel | None = None
        self.l2: ChainLevel | None = None
        if not config.cluster.role.takes_agents:
            return
        pool = DrainPool(RECORD_POOL, w.record_pool_size, instruments)
        for model in AGENT_RECORD_TYPES:
            worker = RecordPersistentWorker(
                worker_id(model, Stage.L2),
                f"{model.MODEL}_records",
                model,
                dao,
                pool,
                instruments,
                admitted_buffer(config, 1),
                BatchPolicy(max_items=w.record_bulk_size),
                topics,
                spill_dir,
            )
            budget.hold(worker.held)
            workers.register(worker)
            self._entries[model] = worker
        # Closing: what storage has not taken within the grace is spilled (or
        # dropped and counted).
        records = list(self._entries.values())
        self.l2 = ChainLevel(
            pool,
            Periodic("records-spilled", SPILL_RETRY_S, self._apply_spilled, "storing spilled records"),
            give_up=[r.interrupt_retries for r in records],
            after_drain=[r.spill for r in records],
        )

    def entry(self, model: type[Record]) -> Worker[Record]:
        return self._entries[model]

    def _apply_spilled(self) -> None:
        for worker in self._entries.values():
            worker.apply_spilled()
