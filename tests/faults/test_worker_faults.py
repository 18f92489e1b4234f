"""A worker process of a node (``skyoap node --workers 2``) killed under
agent load, on real processes: the parent starts it again and counts it; the
node loses at most what the killed worker held and counts nothing twice."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.runtime.scrape import read_metrics
from tests.faults.support import AgentLoad, settle
from tests.faults.test_cluster_faults import UNPERSISTED_S
from tests.integration.cluster_support import serving_workers
from tests.integration.helpers import eventually
from tests.integration.test_node_workers import start

pytestmark = pytest.mark.faults

LOAD = "4 agents x 50 segments/s over one port"


def test_a_killed_worker_is_started_again_and_the_node_loses_at_most_what_it_held(
    local_cluster: Callable[..., LocalCluster], es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    _, node, config = start(local_cluster, es_server, redis_server)
    with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=4) as load:
        time.sleep(5)
        victim = serving_workers(node)[1]
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        eventually(lambda: serving_workers(node).get(1) not in (None, victim), timeout_s=300)
        time.sleep(5)
    # What the dead worker held: L1 results it took, and those the other
    # worker routed to it, in the last seconds before it died.
    held = load.ledger.taken_between(killed_at - UNPERSISTED_S, killed_at)
    fault = "a worker of 2 killed (SIGKILL), started again"
    outcome, _ = settle(fault, LOAD, load.ledger, config, node, held)
    assert outcome.double_counted == 0
    assert outcome.lost <= held
    assert read_metrics(node.admin).value("skyoap_node_worker_restarts_total", process="1") == 1
    assert f"worker 1 (pid {victim}) was killed by SIGKILL" in Path(node.log).read_text()
