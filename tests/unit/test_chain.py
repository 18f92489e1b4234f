"""The worker chain: L1 combine, the remote hop, L2 persistence under the lock."""

from __future__ import annotations

import time

from skyoap.aggregator.persistent import InventoryPersistentWorker
from skyoap.model.inventory import ServiceInstanceInventory, ServiceInventory
from skyoap.model.stream import Stage, worker_id
from skyoap.receiver.distinct import DistinctWorker
from skyoap.remote.client import SelfRemoteClient
from skyoap.remote.cluster import Member, StandaloneCluster
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.sender import RemoteSender
from skyoap.runtime.buffer import BufferSpec, BufferStrategy
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.pools import DrainPool
from skyoap.runtime.worker import Worker, Workers
from skyoap.storage.embedded.sequences import LocalSequenceAllocator
from skyoap.wiring.chains import InventoryStreamProcessor
from skyoap.wiring.config import NodeConfig
from tests.unit.fakes import Collect, MemoryInventoryDAO


def distinct(next_worker: Worker[ServiceInventory]) -> DistinctWorker[ServiceInventory]:
    instruments = Instruments()
    pool = DrainPool("L1", 1, instruments)
    return DistinctWorker(
        1, "l1", next_worker, pool, instruments, BufferSpec(1, 10_000, BufferStrategy.BLOCKING)
    )


def test_l1_combines_equal_items_within_a_batch() -> None:
    out: Collect[ServiceInventory] = Collect()
    worker = distinct(out)
    batch = [ServiceInventory(name=f"s{i % 3}", heartbeat_time=i) for i in range(9)]
    worker.handle_batch(batch)
    assert sorted((i.name, i.heartbeat_time) for i in out.items) == [("s0", 6), ("s1", 7), ("s2", 8)]


def test_l1_hands_on_every_1000_items_and_at_the_end_of_the_batch() -> None:
    out: Collect[ServiceInventory] = Collect()
    worker = distinct(out)
    worker.handle_batch([ServiceInventory(name=f"s{i % 10}", heartbeat_time=i) for i in range(2500)])
    # Three flushes (1000, 1000, 500 items) of the same 10 names each.
    assert len(out.items) == 30
    assert [i.heartbeat_time for i in out.items if i.name == "s0"] == [990, 1990, 2490]


def persistent(dao: MemoryInventoryDAO) -> InventoryPersistentWorker[ServiceInventory]:
    instruments = Instruments()
    pool = DrainPool("L2", 1, instruments)
    return InventoryPersistentWorker(
        2,
        "l2",
        ServiceInventory,
        dao,
        LocalSequenceAllocator(),
        pool,
        instruments,
        BufferSpec(1, 10_000, BufferStrategy.BLOCKING),
    )


def test_l2_inserts_new_names_with_dense_sequences_and_updates_known_ones() -> None:
    dao = MemoryInventoryDAO()
    worker = persistent(dao)
    worker.handle_batch([ServiceInventory(name=n, heartbeat_time=1) for n in ("a", "b", "a", "c")])
    assert [(r.name, r.sequence) for r in dao.list(ServiceInventory)] == [("a", 1), ("b", 2), ("c", 3)]
    worker.handle_batch([ServiceInventory(name="b", heartbeat_time=50, properties={"k": "v"})])
    b = dao.get_many(ServiceInventory, ["b"])["b"].item
    assert (b.sequence, b.heartbeat_time, dict(b.properties)) == (2, 50, {"k": "v"})
    assert dao.inserts == 1


def test_l2_allocates_again_when_the_ids_are_reserved_already() -> None:
    dao = MemoryInventoryDAO()
    dao.fence = {"service_inventory": 2}  # reserved by another writer while the allocator had lost its state
    worker = persistent(dao)
    worker.handle_batch([ServiceInventory(name=n) for n in ("a", "b", "c")])
    assert sorted(r.sequence for r in dao.list(ServiceInventory)) == [3, 4, 5]
    assert dao.fence == {"service_inventory": 5}


def test_l2_reads_again_when_another_writer_stored_the_name_first() -> None:
    dao = MemoryInventoryDAO()
    dao.install([ServiceInventory])
    dao.rows["service_inventory"]["a"] = (ServiceInventory(name="a", sequence=1, heartbeat_time=1), 1)
    dao.fence = {"service_inventory": 1}
    worker = persistent(dao)
    # Hide the stored row from the first read only, as if it were written just after.
    real_get = dao.get_many
    calls = {"n": 0}

    def racy_get(model, keys):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        return {} if calls["n"] <= 2 else real_get(model, keys)

    dao.get_many = racy_get  # type: ignore[method-assign]
    worker.handle_batch([ServiceInventory(name="a", heartbeat_time=9)])
    rows = dao.list(ServiceInventory)
    assert [(r.name, r.sequence, r.heartbeat_time) for r in rows] == [("a", 1, 9)]


def test_the_whole_chain_on_one_node_stores_each_name_once() -> None:
    dao = MemoryInventoryDAO()
    instruments = Instruments()
    workers = Workers()
    clients = RemoteClientManager(
        StandaloneCluster(Member("mixed@127.0.0.1:1", "mixed", "127.0.0.1:1", 0.0)),
        lambda node: SelfRemoteClient(node.address, workers),
        60,
    )
    clients.refresh()
    config = NodeConfig()
    sender = RemoteSender(clients, instruments)
    processor = InventoryStreamProcessor(config, dao, LocalSequenceAllocator(), workers, sender, instruments)
    assert processor.l1 is not None and processor.l2 is not None
    processor.l2.start()
    processor.l1.start()
    entry = processor.entry(ServiceInstanceInventory)
    assert entry is workers.get(worker_id(ServiceInstanceInventory, Stage.L1))
    for round_ in range(3):
        for n in range(100):
            entry.accept(
                ServiceInstanceInventory(
                    name=f"i{n}", service_id=1, instance_uuid=f"u{n}", heartbeat_time=round_
                )
            )
    deadline = time.monotonic() + 10
    while len(dao.list(ServiceInstanceInventory)) < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    processor.l1.close(5)
    processor.l2.close(5)
    rows = dao.list(ServiceInstanceInventory)
    assert sorted(r.sequence for r in rows) == list(range(1, 101))
    assert {r.instance_uuid for r in rows} == {f"u{n}" for n in range(100)}
    assert all(r.heartbeat_time == 2 for r in rows)
    received = instruments.value("skyoap_worker_received_total", worker="service_instance_inventory_l1")
    assert received == 300
    assert (
        instruments.value("skyoap_worker_handed_on_total", worker="service_instance_inventory_l1") <= received
    )
