"""Redis loses its data in the middle of a registration storm."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from skyoap.agent import Agent
from skyoap.model.inventory import ServiceInstanceInventory, ServiceInventory
from skyoap.storage.config import StorageKind
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import stored


@pytest.mark.parametrize("node_config", ["elasticsearch"], indirect=True)
@pytest.mark.parametrize("writers", [1, 2])
def test_no_id_is_handed_out_twice_when_redis_is_flushed_mid_storm(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node], writers: int
) -> None:
    """With two writers (two nodes persisting into the same storage), a flush also
    drops the global lock while one of them holds it, so both allocate at once
    from a recovered counter: storage must refuse the second use of a sequence."""
    assert node_config.storage.kind is StorageKind.ELASTICSEARCH
    nodes = [start_node(node_config) for _ in range(writers)]
    r = redis.Redis.from_url(node_config.storage.redis_url)
    stop = threading.Event()
    flushes = 0

    def flush_repeatedly() -> None:
        nonlocal flushes
        while not stop.wait(0.05):
            r.flushall()
            flushes += 1

    flusher = threading.Thread(target=flush_repeatedly)
    agents = [
        Agent(nodes[i % writers].address, f"svc-{i % 60}", instance_uuid=f"inst-{i}", retry_interval_s=0.05)
        for i in range(240)
    ]
    flusher.start()
    try:
        with ThreadPoolExecutor(max_workers=len(agents)) as pool:
            results = list(pool.map(lambda a: a.register(timeout_s=120), agents))
    finally:
        stop.set()
        flusher.join()
        for a in agents:
            a.close()
    assert flushes >= 3

    services = stored(node_config.storage, ServiceInventory)
    instances = stored(node_config.storage, ServiceInstanceInventory)
    assert len(services) == 60
    assert len(instances) == 240
    # No sequence was given to two names, in either scope.
    assert [seq for seq, n in Counter(s.sequence for s in services).items() if n > 1] == []
    assert [seq for seq, n in Counter(i.sequence for i in instances).items() if n > 1] == []
    # And every agent holds the id storage holds for its names.
    by_name = {s.name: s.sequence for s in services}
    by_uuid = {i.instance_uuid: i.sequence for i in instances}
    for a, ids in zip(agents, results, strict=True):
        assert ids.service_id == by_name[a.service_name]
        assert ids.instance_id == by_uuid[a.instance_uuid]
