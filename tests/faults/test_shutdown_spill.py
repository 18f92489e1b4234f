"""A node stopped while its Elasticsearch does not answer, on real processes:
it spills what it holds to its spill directory and exits; Elasticsearch comes
back; the node started again on the same directory stores the spill, exactly
once, even when that start is killed and started once more."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.runtime.scrape import read_metrics
from tests.conftest import FAST_CLUSTER
from tests.faults.support import AgentLoad, Ledger, settle, storage_config
from tests.faults.test_storage_faults import NODE, assert_exact

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def es() -> Iterator[ElasticsearchServer]:
    server = ElasticsearchServer().start()
    yield server
    server.stop()


@pytest.fixture
def cluster(redis_server: RedisServer, es: ElasticsearchServer, tmp_path: Path) -> Iterator[LocalCluster]:
    spill = tmp_path / "spill"
    made = LocalCluster.create(
        tmp_path / "cluster", redis_server.url, es.url, [*FAST_CLUSTER, *NODE, "--spill-dir", str(spill)]
    )
    yield made
    made.down()


def spills(cluster: LocalCluster) -> list[Path]:
    """The spill files the cluster's nodes left (their --spill-dir is beside the cluster's)."""
    return sorted((cluster.workdir.parent / "spill").glob("*.spill.json"))


def stopped_while_frozen(es: ElasticsearchServer, cluster: LocalCluster) -> tuple[Ledger, float]:
    """Runs agents against a node, freezes Elasticsearch, stops the node with
    SIGTERM and thaws Elasticsearch once the node has exited; returns the
    ledger and how long the node took to exit."""
    node = cluster.add("mixed")
    with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=2) as load:
        time.sleep(4)
        es.kill(signal.SIGSTOP)
        time.sleep(4)  # the node takes segments it cannot store
    try:
        began = time.monotonic()
        cluster.remove(node, timeout_s=120)
        took = time.monotonic() - began
    finally:
        es.kill(signal.SIGCONT)
    log = Path(node.log).read_text()
    assert "stopped (pid" in log, "the node did not finish its close (it was killed)"
    assert "kept in" in log  # it spilled
    return load.ledger, took


def applied(node: NodeProcess) -> float:
    return read_metrics(node.admin).total("skyoap_spill_applied_total")


def test_a_node_stopped_while_storage_is_frozen_stores_what_it_held_at_its_next_start(
    es: ElasticsearchServer, cluster: LocalCluster
) -> None:
    ledger, took = stopped_while_frozen(es, cluster)
    assert spills(cluster)
    node = cluster.add("mixed")
    config = storage_config(es.url, cluster.state.redis_url, cluster.state.prefix)
    outcome, levels = settle(
        f"node stopped (SIGTERM) while Elasticsearch is frozen (exit in {took:.0f} s), started again "
        "on its spill", "2 agents x 50 segments/s", ledger, config, node,
    )  # fmt: skip
    assert_exact(outcome, levels, ledger)
    assert applied(node) > 0
    assert spills(cluster) == []


def test_a_start_killed_while_storing_the_spill_leaves_the_sums_exact(
    es: ElasticsearchServer, cluster: LocalCluster
) -> None:
    ledger, took = stopped_while_frozen(es, cluster)
    node = cluster.add("mixed")
    deadline = time.monotonic() + 120
    while applied(node) == 0:  # wait until it has stored some of the spill
        assert time.monotonic() < deadline, "the restarted node stored nothing of the spill"
        time.sleep(0.05)
    cluster.remove(node, kill=True)
    print(f"{len(spills(cluster))} spill files left by the killed start")
    node = cluster.add("mixed")
    config = storage_config(es.url, cluster.state.redis_url, cluster.state.prefix)
    outcome, levels = settle(
        f"node stopped while Elasticsearch is frozen (exit in {took:.0f} s); its next start killed "
        "(SIGKILL) while storing the spill, started again", "2 agents x 50 segments/s", ledger, config, node,
    )  # fmt: skip
    assert_exact(outcome, levels, ledger)
    assert spills(cluster) == []
