"""Many agents registering the same names at once, on each storage."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from skyoap.agent import Agent
from skyoap.model.inventory import ServiceInstanceInventory, ServiceInventory
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import stored

SERVICES = 50
INSTANCES = 4


def test_a_storm_of_200_agents_gives_every_name_exactly_one_id(
    node_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config)
    agents = [
        Agent(node.address, f"svc-{s}", instance_uuid=f"svc-{s}-inst-{i}", retry_interval_s=0.1)
        for i in range(INSTANCES)
        for s in range(SERVICES)
    ]
    with ThreadPoolExecutor(max_workers=len(agents)) as pool:
        results = list(pool.map(lambda a: a.register(timeout_s=120), agents))
    for a in agents:
        a.close()

    service_ids: dict[str, set[int]] = defaultdict(set)
    for a, ids in zip(agents, results, strict=True):
        service_ids[a.service_name].add(ids.service_id)
    # Every agent of a service got the same id, and ids are 1..50 with no gap.
    assert {name: len(ids) for name, ids in service_ids.items()} == {f"svc-{s}": 1 for s in range(SERVICES)}
    assert sorted(next(iter(ids)) for ids in service_ids.values()) == list(range(1, SERVICES + 1))
    assert sorted(ids.instance_id for ids in results) == list(range(1, SERVICES * INSTANCES + 1))

    services = stored(node_config.storage, ServiceInventory)
    assert sorted((s.name, s.sequence) for s in services) == sorted(
        (name, next(iter(ids))) for name, ids in service_ids.items()
    )
    instances = stored(node_config.storage, ServiceInstanceInventory)
    assert len(instances) == SERVICES * INSTANCES
    by_uuid = {i.instance_uuid: i for i in instances}
    for a, ids in zip(agents, results, strict=True):
        row = by_uuid[a.instance_uuid]
        assert (row.sequence, row.service_id) == (ids.instance_id, ids.service_id)
