"""A worker process of a node (``skyoap node --workers 2``) killed, on real
processes: under agent load, the parent starts it again and counts it, and
the node loses at most what the killed worker held and counts nothing
twice; a worker that cannot start is started again after growing pauses."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.runtime.scrape import read_metrics
from tests.faults.support import AgentLoad, settle
from tests.faults.test_cluster_faults import UNPERSISTED_S
from tests.faults.test_storage_faults import NODE
from tests.integration.cluster_support import health, metric, serving_workers
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


def free_pair() -> int:
    """A port P with P + 1 free too (each worker takes --internal-port + its
    index), below the ephemeral ports, which connections take at any time."""
    while True:
        port = random.randrange(20_000, 32_000)
        with contextlib.suppress(AssertionError), bound(port), bound(port + 1):
            return port


def bound(port: int) -> socket.socket:
    try:
        return socket.create_server(("127.0.0.1", port))
    except OSError as e:
        raise AssertionError(f"port {port} is taken: {e}") from e


def test_a_worker_that_keeps_dying_at_its_start_is_started_again_after_growing_pauses(
    local_cluster: Callable[..., LocalCluster], es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    """Worker 1's internal port taken by another process: each start fails,
    saying why; once the port is free, it serves again."""
    cluster = local_cluster(*NODE)
    internal = free_pair()
    node = cluster.add("mixed", "--workers", "2", "--internal-port", str(internal), timeout_s=240)
    victim = serving_workers(node)[1]
    os.kill(victim, signal.SIGKILL)
    with eventually(lambda: bound(internal + 1), timeout_s=60):  # once the killed worker let go of it
        eventually(lambda: metric(node, "skyoap_node_worker_restarts_total", process="1") >= 4, timeout_s=300)
        assert health(node)[0] == 503
    eventually(lambda: serving_workers(node).get(1) not in (None, victim), timeout_s=300)
    refused = f"exited with code 2 (cannot listen on 127.0.0.1:{internal + 1}: the address is in use"
    pauses = [
        float(s)
        for line in Path(node.log).read_text().splitlines()
        if refused in line
        for s in re.findall(r"starting it again in ([\d.]+) s$", line)
    ]
    assert len(pauses) >= 3, pauses
    assert pauses == sorted(pauses) and pauses[-1] > pauses[0], pauses
