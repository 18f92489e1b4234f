"""The inventory stream processor: builds each inventory type's worker chain,

    DistinctWorker (L1) -> RemoteWorker -> InventoryPersistentWorker (L2)

as far as the node's role needs it: a receiver has L1 and the remote worker, an
aggregator has L2, a mixed node has all three.
"""

from __future__ import annotations

from collections.abc import Callable

from aggregator.persistent import InventoryPersistentWorker
from pipeline.buffer import BufferSpec
from pipeline.config import NodeConfig
from pipeline.consumers import ConsumerPools
from pipeline.instruments import Instruments
from pipeline.inventory import INVENTORY_TYPES, Inventory
from pipeline.stream import Stage, worker_id
from pipeline.worker import Worker, Workers
from receiver.distinct import DistinctWorker
from remote.selector import SelectorKind
from remote.sender import RemoteSender
from remote.worker import RemoteWorker
from storage.api import InventoryDAO, SequenceAllocator

L1_POOL = "REGISTER_L1"
L2_POOL = "REGISTER_L2"


class InventoryStreamProcessor:
    def __init__(
        self,
        config: NodeConfig,
        dao: InventoryDAO,
        sequences: SequenceAllocator,
        pools: ConsumerPools,
        workers: Workers,
        sender: RemoteSender | None,
        instruments: Instruments,
        selector: SelectorKind = SelectorKind.FOREVER_FIRST,
        on_stored: Callable[[type[Inventory], list[Inventory]], None] | None = None,
    ) -> None:
        """``selector`` defaults to forever-first: every new name goes to one
        node, so one writer allocates each scope's sequences. ``on_stored`` hears
        of every row L2 inserts. An aggregator has no L1 and needs no ``sender``."""
        self._entries: dict[type[Inventory], Worker[Inventory]] = {}
        for model in INVENTORY_TYPES:
            if config.role.is_target:
                workers.register(
                    InventoryPersistentWorker(
                        worker_id(model, Stage.L2),
                        f"{model.MODEL}_l2",
                        model,
                        dao,
                        sequences,
                        pools.get_or_create(L2_POOL, config.l2_pool_size),
                        instruments,
                        BufferSpec(config.l2_channels, config.l2_buffer_size, config.l2_strategy),
                        flush_every=config.l2_batch_size,
                        on_stored=on_stored,
                    )
                )
            if not config.role.takes_agents:
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
                pools.get_or_create(L1_POOL, config.l1_pool_size),
                instruments,
                BufferSpec(
                    config.l1_channels, config.l1_buffer_size, config.l1_strategy, config.l1_max_wait_s
                ),
            )
            workers.register(l1)
            self._entries[model] = l1

    def entry(self, model: type[Inventory]) -> Worker[Inventory]:
        """The first worker of ``model``'s chain on this node."""
        return self._entries[model]
