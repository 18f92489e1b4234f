from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from skyoap.model.inventory import ServiceInventory
from skyoap.model.stream import StreamData
from skyoap.remote.cluster import RemoteNode
from skyoap.remote.manager import RemoteClientManager
from skyoap.remote.selector import ForeverFirst, RendezvousHash, Rolling, SelectorKind
from skyoap.remote.sender import RemoteSender
from skyoap.remote.worker import RemoteWorker
from skyoap.runtime.budget import MemoryBudget, memory_size
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.worker import UnknownWorker, Worker, Workers


class FakeClient:
    def __init__(self, address: str) -> None:
        self._address = address
        self.pushed: list[tuple[int, StreamData]] = []
        self.started = False
        self.left = False

    @property
    def address(self) -> str:
        return self._address

    def push(self, next_worker_id: int, item: StreamData) -> None:
        self.pushed.append((next_worker_id, item))

    def start(self) -> None:
        self.started = True

    def close(self, timeout_s: float) -> None:
        pass

    def leave(self) -> None:
        self.left = True


class Nodes:
    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)
        self.incarnations: dict[str, str] = {}

    def remote_nodes(self) -> list[RemoteNode]:
        return [RemoteNode(a, incarnation=self.incarnations.get(a, "")) for a in self.addresses]


def wait_until(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def clients(*addresses: str) -> list[FakeClient]:
    return [FakeClient(a) for a in sorted(addresses)]


def test_forever_first_always_picks_the_first_sorted_node() -> None:
    cs = clients("b:1", "a:1", "c:1")
    assert {ForeverFirst().select(f"k{i}", cs).address for i in range(50)} == {"a:1"}


def test_rolling_goes_round_robin() -> None:
    cs = clients("a:1", "b:1", "c:1")
    r = Rolling()
    assert [r.select("k", cs).address for _ in range(6)] == ["a:1", "b:1", "c:1", "a:1", "b:1", "c:1"]


def test_hash_sends_one_key_to_one_node_and_spreads_keys() -> None:
    cs = clients("a:1", "b:1", "c:1")
    h = RendezvousHash()
    keys = [f"service-{i}" for i in range(3000)]
    owners = {k: h.select(k, cs).address for k in keys}
    assert all(h.select(k, cs).address == owners[k] for k in keys)
    spread = Counter(owners.values())
    assert set(spread) == {"a:1", "b:1", "c:1"}
    assert min(spread.values()) > 800  # an even share is 1000


def test_hash_moves_only_the_keys_a_joining_node_wins() -> None:
    h = RendezvousHash()
    keys = [f"k{i}" for i in range(4000)]
    before = {k: h.select(k, clients("a:1", "b:1", "c:1")).address for k in keys}
    after = {k: h.select(k, clients("a:1", "b:1", "c:1", "d:1")).address for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "d:1" for k in moved)
    assert 0.2 < len(moved) / len(keys) < 0.3  # about 1/4
    # And a node leaving moves only its own keys.
    gone = {k: h.select(k, clients("a:1", "c:1", "d:1")).address for k in keys}
    assert [k for k in keys if after[k] != gone[k]] == [k for k in keys if after[k] == "b:1"]


def test_selector_kinds_build_their_selectors() -> None:
    assert isinstance(SelectorKind("hash").build(), RendezvousHash)
    assert isinstance(SelectorKind("rolling").build(), Rolling)
    assert isinstance(SelectorKind("forever-first").build(), ForeverFirst)


def test_refresh_builds_the_next_list_beside_the_one_in_use() -> None:
    nodes = Nodes("n1:1", "n2:1", "n3:1", "n4:1")
    made: list[FakeClient] = []

    def make(node: RemoteNode) -> FakeClient:
        made.append(FakeClient(node.address))
        return made[-1]

    manager = RemoteClientManager(nodes, make)
    manager.refresh()
    first = manager.clients
    assert [c.address for c in first] == ["n1:1", "n2:1", "n3:1", "n4:1"]
    nodes.addresses = ["n1:1", "n3:1", "n4:1", "n5:1"]  # n2 leaves, n5 joins
    manager.refresh()
    second = manager.clients
    assert [c.address for c in second] == ["n1:1", "n3:1", "n4:1", "n5:1"]
    assert second[0] is first[0] and second[1] is first[2] and second[2] is first[3]
    assert [c.address for c in made] == ["n1:1", "n2:1", "n3:1", "n4:1", "n5:1"]
    assert [c.left for c in made] == [False, True, False, False, False]
    assert all(c.started for c in made)
    # The list a sender read before the swap is untouched by it.
    assert [c.address for c in first] == ["n1:1", "n2:1", "n3:1", "n4:1"]
    manager.refresh()
    assert manager.clients is second  # no change, no new list


def test_a_node_restarted_at_the_same_address_gets_a_new_client() -> None:
    """It forgot which batches it took: the client of its earlier run leaves
    (counting what that run did not confirm), and a new one sends to it."""
    nodes = Nodes("a:1", "b:1")
    nodes.incarnations = {"a:1": "run-1", "b:1": "run-1"}
    made: list[tuple[str, FakeClient]] = []

    def make(node: RemoteNode) -> FakeClient:
        made.append((node.incarnation, FakeClient(node.address)))
        return made[-1][1]

    manager = RemoteClientManager(nodes, make)
    manager.refresh()
    nodes.incarnations["a:1"] = "run-2"
    manager.refresh()
    assert [(i, c.address, c.left) for i, c in made] == [
        ("run-1", "a:1", True),
        ("run-1", "b:1", False),
        ("run-2", "a:1", False),
    ]
    assert manager.clients == (made[2][1], made[1][1])


def test_the_remote_worker_routes_to_the_selected_node_and_worker() -> None:
    manager = RemoteClientManager(Nodes("a:1", "b:1"), lambda n: FakeClient(n.address))
    manager.refresh()
    sender = RemoteSender(manager, Instruments())
    worker: RemoteWorker[ServiceInventory] = RemoteWorker(2, "remote", 3, sender, ForeverFirst())
    item = ServiceInventory(name="s")
    worker.accept(item)
    first = manager.clients[0]
    assert isinstance(first, FakeClient)
    assert first.pushed == [(3, item)]


def test_with_no_target_items_are_held_in_the_memory_budget_then_sent_when_one_appears() -> None:
    nodes = Nodes()
    made: list[FakeClient] = []

    def make(node: RemoteNode) -> FakeClient:
        made.append(FakeClient(node.address))
        return made[-1]

    manager = RemoteClientManager(nodes, make)
    manager.refresh()
    instruments = Instruments()
    budget = MemoryBudget(1024, instruments)
    sender = RemoteSender(manager, instruments, budget)
    sender.start()
    worker: RemoteWorker[ServiceInventory] = RemoteWorker(2, "remote", 3, sender, ForeverFirst())
    items = [ServiceInventory(name=f"s{i}") for i in range(5)]
    for item in items:
        worker.accept(item)
    # Past the budget: nothing is dropped, and agents' calls are shed meanwhile.
    assert instruments.value("skyoap_remote_parked_items") == 5
    assert budget.held() == memory_size(items) > budget.limit_bytes
    nodes.addresses = ["a:1"]
    manager.refresh()  # sends what was parked, from a thread of its own
    wait_until(lambda: len(made[0].pushed) == 5)
    assert [item.key() for _, item in made[0].pushed] == ["s0", "s1", "s2", "s3", "s4"]
    assert instruments.value("skyoap_remote_parked_items") == 0
    assert budget.held() == 0
    sender.close(5)
    assert not any(t.name == "remote-sender" for t in threading.enumerate())


def test_what_a_departed_node_held_goes_to_the_new_owner() -> None:
    manager = RemoteClientManager(Nodes("a:1", "b:1"), lambda n: FakeClient(n.address))
    manager.refresh()
    instruments = Instruments()
    sender = RemoteSender(manager, instruments)
    sender.start()
    sender.route_with(3, ForeverFirst())
    held: list[tuple[int, StreamData]] = [(3, ServiceInventory(name=f"s{i}")) for i in range(4)]
    sender.reroute(held)
    first = manager.clients[0]
    assert isinstance(first, FakeClient)
    wait_until(lambda: instruments.value("skyoap_remote_rerouted_total") == 4)
    assert first.pushed == held
    assert instruments.value("skyoap_remote_rerouted_total") == 4
    sender.close(5)


def test_workers_are_found_by_id_and_ids_are_unique() -> None:
    class W(Worker[ServiceInventory]):
        def accept(self, item: ServiceInventory) -> None:
            pass

    workers = Workers()
    w = W(17, "w")
    workers.register(w)
    assert workers.get(17) is w
    with pytest.raises(UnknownWorker, match="no worker with id 18"):
        workers.get(18)
    with pytest.raises(ValueError, match="share id 17"):
        workers.register(W(17, "other"))
