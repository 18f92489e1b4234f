"""What the web UI's cluster page reads, ``GET /status/cluster/overview``:
every node of a cluster with its role, addresses and self-metrics (its own,
or another's from its admin port), and every consumer group's members,
commits and lag."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from skyoap.consumer.client import Consumer, TopicPartition
from skyoap.remote.cluster import Role
from skyoap.storage.select import OpenStorage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import eventually
from tests.integration.test_consumer import FAST, TOPIC, drain, fill
from tests.integration.test_security import cluster_config

__all__ = ["cluster_config"]  # a fixture of this module's tests

FIGURES = {"queued", "capacity", "dropped", "shed", "memoryHeld", "memoryLimit", "received", "stored",
           "persistMeanMs", "persistP99Ms"}  # fmt: skip


def overview(node: Node) -> dict[str, Any]:
    assert node.ui_url is not None
    with urllib.request.urlopen(f"{node.ui_url}status/cluster/overview", timeout=30) as answer:
        assert answer.headers["Content-Type"] == "application/json"
        found: dict[str, Any] = json.loads(answer.read())
        return found


def test_a_node_shows_itself_and_each_groups_members_commits_and_lag(
    node_config: NodeConfig, storage: OpenStorage, start_node: Callable[[NodeConfig], Node]
) -> None:
    node = start_node(node_config.with_options(topic_partitions=2))
    fill(storage, 10, partitions=2)  # nothing reports to the node: the test fills its topic
    consumer = Consumer.open(node_config.storage, "g1", member_id="first", enable_auto_commit=False, **FAST)
    try:
        consumer.subscribe([TOPIC])
        drain(consumer, 20)
        consumer.commit({TopicPartition(TOPIC, 0): 3, TopicPartition(TOPIC, 1): 9})
        seen = overview(node)
    finally:
        consumer.close()
    ((me,),) = [seen["nodes"]]
    assert (me["name"], me["role"], me["address"], me["self"], me["unread"]) == (
        node.name, "mixed", node.address, True, None
    )  # fmt: skip
    assert set(me["figures"]) == FIGURES
    assert me["figures"]["memoryLimit"] == node.config.limits.memory_limit_mb * 2**20
    ((group,),) = [seen["groups"]]
    ((member,),) = [group["members"]]
    assert (group["name"], member["name"], member["topics"], group["lag"]) == ("g1", "first", [TOPIC], 6)
    assert group["partitions"] == [
        {"topic": TOPIC, "partition": 0, "owner": "first", "state": "OPEN", "committed": 3, "end": 10,
         "lag": 6},
        {"topic": TOPIC, "partition": 1, "owner": "first", "state": "OPEN", "committed": 9, "end": 10,
         "lag": 0},
    ]  # fmt: skip


def test_every_node_of_a_cluster_is_shown_with_the_figures_its_admin_port_serves(
    cluster_config: NodeConfig, start_node: Callable[[NodeConfig], Node]
) -> None:
    cluster_config = cluster_config.with_options(cluster_secret="overview")
    watched = start_node(cluster_config.with_options(admin_port=0))
    unwatched = start_node(cluster_config.with_options(role=Role.AGGREGATOR))
    eventually(lambda: len(overview(unwatched)["nodes"]) == 2)
    nodes = {n["name"]: n for n in overview(unwatched)["nodes"]}
    assert (nodes[watched.name]["self"], nodes[watched.name]["admin"]) == (
        False, f"127.0.0.1:{watched.admin_port}"
    )  # fmt: skip
    assert set(nodes[watched.name]["figures"]) == FIGURES
    assert nodes[unwatched.name]["self"] is True  # its own figures need no admin port
    assert set(nodes[unwatched.name]["figures"]) == FIGURES
    seen_from_watched = {n["name"]: n for n in overview(watched)["nodes"]}
    assert seen_from_watched[unwatched.name]["figures"] is None
    assert seen_from_watched[unwatched.name]["unread"] == "it serves no /metrics (its --admin-port is off)"
    assert {n["role"] for n in seen_from_watched.values()} == {"mixed", "aggregator"}
