"""Clusters of separate node processes on real Redis and Elasticsearch:
receivers, aggregators, routing, failures and scaling."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from skyoap.agent import Agent
from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.edge.auth import SendingClusterSecret
from skyoap.model.inventory import ServiceInventory
from skyoap.model.stream import Stage, worker_id
from skyoap.proto import remote_pb2
from skyoap.remote.grpc_client import CALL, LEAVE_S, encode
from skyoap.storage.config import StorageConfig, StorageKind
from tests.integration.cluster_support import metric, rendezvous_owner
from tests.integration.helpers import eventually, stored

SERVICE_L2 = "l2_received_total_service_inventory_l2"


def inserted(node: NodeProcess, model: str) -> float:
    """Rows of ``model`` the node's L2 inserted."""
    return metric(node, "skyoap_worker_stored_total", worker=f"{model}_l2", op="insert")


def instance_l2(node: NodeProcess) -> float:
    """Instance registrations the node's L2 took."""
    return metric(node, "skyoap_worker_received_total", worker="service_instance_inventory_l2")


def storage_of(cluster: LocalCluster) -> StorageConfig:
    s = cluster.state
    return StorageConfig(
        kind=StorageKind.ELASTICSEARCH, es_hosts=s.es_hosts, es_index_prefix=s.prefix,
        redis_url=s.redis_url, redis_key_prefix=s.prefix,
    )  # fmt: skip


def register_all(agents: list[Agent]) -> list[tuple[int, int]]:
    with ThreadPoolExecutor(max_workers=len(agents)) as pool:
        ids = list(pool.map(lambda a: a.register(timeout_s=120), agents))
    return [(i.service_id, i.instance_id) for i in ids]


def test_three_receivers_and_two_aggregators_converge_on_one_id_per_name(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster()
    aggregators = sorted((cluster.add("aggregator") for _ in range(2)), key=lambda n: n.address)
    receivers = [cluster.add("receiver") for _ in range(3)]
    agents = [
        Agent(receivers[i % 3].address, f"svc-{i % 50}", instance_uuid=f"inst-{i}", retry_interval_s=0.1)
        for i in range(200)
    ]
    ids = register_all(agents)
    for a in agents:
        a.close()

    by_service: dict[str, set[int]] = {}
    for a, (service_id, _) in zip(agents, ids, strict=True):
        by_service.setdefault(a.service_name, set()).add(service_id)
    assert all(len(v) == 1 for v in by_service.values())
    assert sorted(next(iter(v)) for v in by_service.values()) == list(range(1, 51))
    assert sorted(instance for _, instance in ids) == list(range(1, 201))
    services = stored(storage_of(cluster), ServiceInventory)
    assert sorted((s.name, s.sequence) for s in services) == sorted(
        (name, next(iter(v))) for name, v in by_service.items()
    )
    # Forever-first: one aggregator, the first by address, persisted every name.
    assert inserted(aggregators[0], "service_inventory") == 50
    assert inserted(aggregators[0], "service_instance_inventory") == 200
    assert inserted(aggregators[1], "service_inventory") == 0


def test_a_killed_aggregator_is_replaced_and_nothing_held_by_receivers_is_lost(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster()
    first, second = sorted((cluster.add("aggregator") for _ in range(2)), key=lambda n: n.address)
    receivers = [cluster.add("receiver") for _ in range(2)]
    stop = threading.Event()
    agents: list[Agent] = []
    results: list[tuple[int, int]] = []
    lock = threading.Lock()

    def keep_registering(worker: int) -> None:
        n = 0
        while not stop.is_set():
            agent = Agent(receivers[n % 2].address, f"svc-{worker}-{n}", retry_interval_s=0.1)
            ids = agent.register(timeout_s=120)
            with lock:
                agents.append(agent)
                results.append((ids.service_id, ids.instance_id))
            n += 1

    threads = [threading.Thread(target=keep_registering, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    eventually(lambda: len(results) >= 40)
    cluster.remove(first, kill=True)  # forever-first's writer dies under load
    # Within a refresh interval plus the membership expiry, the receivers route
    # to the survivor alone, and registrations complete through it.
    eventually(lambda: all(metric(r, "skyoap_remote_targets") == 1 for r in receivers))
    done_at_kill = len(results)
    eventually(lambda: inserted(second, "service_inventory") >= 20)
    eventually(lambda: len(results) >= done_at_kill + 40)
    stop.set()
    for t in threads:
        t.join(120)
    for a in agents:
        a.close()

    # Every agent ended with ids, each name exactly one, no id twice.
    services = stored(storage_of(cluster), ServiceInventory)
    assert len({s.name for s in services}) == len(services) == len(agents)
    assert len({s.sequence for s in services}) == len(services)
    by_name = {s.name: s.sequence for s in services}
    assert all(by_name[a.service_name] == ids[0] for a, ids in zip(agents, results, strict=True))
    # The receivers account for every item they routed to the dead node:
    # confirmed by it, in a stream that broke (lost with the node), or given
    # back and routed to the survivor. None vanished. A broken stream is
    # counted once its client has tried the dead node for LEAVE_S.
    dead = first.address

    def all_accounted(r: NodeProcess, pushed: float) -> bool:
        return pushed == sum(
            metric(r, f"skyoap_remote_{what}_total", target=dead)
            for what in ("sent", "rejected", "unconfirmed", "given_back")
        )

    for r in receivers:
        pushed = metric(r, "skyoap_remote_pushed_total", target=dead)
        assert pushed > 0
        eventually(functools.partial(all_accounted, r, pushed), timeout_s=LEAVE_S + 20)


def test_hash_routing_keeps_each_key_on_one_aggregator_and_moves_a_third_when_one_joins(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster("--inventory-selector", "hash")
    aggregators = [cluster.add("aggregator") for _ in range(2)]
    receiver = cluster.add("receiver")
    agents = [
        Agent(receiver.address, "shop", instance_uuid=f"i-{n}", retry_interval_s=0.1) for n in range(300)
    ]
    register_all(agents)
    keys = [f"{a.ids.service_id}_{a.instance_uuid}" for a in agents]  # ServiceInstanceInventory.key()

    def ping_all_and_count(nodes: list[NodeProcess]) -> dict[str, float]:
        before = {n.address: instance_l2(n) for n in nodes}
        with ThreadPoolExecutor(max_workers=30) as pool:
            assert all(pool.map(lambda a: a.ping(), agents))
        expected_total = sum(before.values()) + len(agents)
        eventually(lambda: sum(instance_l2(n) for n in nodes) >= expected_total)
        return {n.address: instance_l2(n) - before[n.address] for n in nodes}

    two = [n.address for n in aggregators]
    expected = Counter(rendezvous_owner(k, two) for k in keys)
    # Stable membership: every key reaches the aggregator that owns it, every time.
    assert ping_all_and_count(aggregators) == dict(expected)
    assert ping_all_and_count(aggregators) == dict(expected)

    third = cluster.add("aggregator")
    eventually(lambda: metric(receiver, "skyoap_remote_targets") == 3)
    three = [*two, third.address]
    moved = [k for k in keys if rendezvous_owner(k, three) != rendezvous_owner(k, two)]
    # Only keys the newcomer wins move; roughly a third.
    assert all(rendezvous_owner(k, three) == third.address for k in moved)
    assert 60 <= len(moved) <= 140
    assert ping_all_and_count([*aggregators, third]) == dict(
        Counter(rendezvous_owner(k, three) for k in keys)
    )
    for a in agents:
        a.close()


def test_bad_remote_messages_are_counted_logged_and_the_stream_goes_on(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster()
    aggregator = cluster.add("aggregator")
    l2 = worker_id(ServiceInventory, Stage.L2)
    messages = [
        encode(l2, ServiceInventory(name="before")).SerializeToString(),
        remote_pb2.RemoteMessage(nextWorkerId=77 * 16 + 3, streamDataId=77).SerializeToString(),
        remote_pb2.RemoteMessage(nextWorkerId=9999, streamDataId=1).SerializeToString(),
        b"\x0a\xff\xff",
        encode(l2, ServiceInventory(name="after")).SerializeToString(),
    ]
    member = SendingClusterSecret(cluster.state.cluster_secret)  # as the cluster's nodes send it
    with grpc.intercept_channel(grpc.insecure_channel(aggregator.internal), member) as channel:
        ack = channel.stream_unary(CALL, response_deserializer=remote_pb2.RemoteAck.FromString)(
            iter(messages), timeout=10
        )
    assert (ack.received, ack.rejected) == (2, 3)
    assert metric(aggregator, "skyoap_remote_service_rejected_total") == 3
    eventually(lambda: {s.name for s in stored(storage_of(cluster), ServiceInventory)} == {"before", "after"})
    log = Path(aggregator.log).read_text()
    assert "refused a message from ipv4:127.0.0.1:" in log
    assert "unknown stream data id 77" in log
