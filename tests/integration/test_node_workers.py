"""``skyoap node --workers 2`` as an operator runs it: one agent port served
by two worker processes, each a member of the cluster, under a parent whose
admin port covers both; on the session's Elasticsearch and Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from skyoap.deploy.cluster import LocalCluster, NodeProcess
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.metrics import Downsampling
from skyoap.proto.skywalking import common_pb2, tracing_pb2
from skyoap.remote.cluster import RedisCluster
from skyoap.runtime.scrape import read_metrics
from skyoap.storage.config import StorageConfig
from tests.faults.support import AgentLoad, segment, storage_config, stored_segments, stored_sums
from tests.faults.test_storage_faults import ANSWERED, NODE
from tests.integration.cluster_support import health, serving_workers
from tests.integration.helpers import eventually
from tests.integration.test_node_process import ROOT, SKYOAP

STORED = {"worker": "segment_records", "op": "write"}


def start(
    local_cluster: Callable[..., LocalCluster], es_server: ElasticsearchServer, redis_server: RedisServer
) -> tuple[LocalCluster, NodeProcess, StorageConfig]:
    cluster = local_cluster(*NODE)
    node = cluster.add("mixed", "--workers", "2", timeout_s=240)
    return cluster, node, storage_config(es_server.url, redis_server.url, cluster.state.prefix)


def report(address: str, numbers: range) -> None:
    """Each segment in a call of its own, over a connection of its own: the
    kernel hands each new connection to one worker."""
    now_ms = int(time.time() * 1000)
    for n in numbers:
        with grpc.insecure_channel(address) as channel:
            collect = channel.stream_unary(
                "/skywalking.v3.TraceSegmentReportService/collect",
                request_serializer=tracing_pb2.SegmentObject.SerializeToString,
                response_deserializer=common_pb2.Commands.FromString,
            )
            collect(iter([segment(n, now_ms)[0]]), timeout=60)


def test_both_workers_take_agents_on_one_port_and_the_node_reads_as_their_sum(
    local_cluster: Callable[..., LocalCluster], es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    cluster, node, config = start(local_cluster, es_server, redis_server)
    status, text = health(node)
    assert (status, text.splitlines()[0]) == (200, "ok: 2 of 2 workers serve")
    assert sorted(serving_workers(node)) == [0, 1]
    assert len(node.internal.split(",")) == 2
    members = RedisCluster(redis_server.url, cluster.state.prefix).members()
    assert sorted(m.name for m in members) == [f"mixed@{node.address}/0", f"mixed@{node.address}/1"]

    report(node.address, range(40))  # all 40 connections on one worker: once in 2^39 runs
    eventually(lambda: read_metrics(node.admin).value("skyoap_worker_stored_total", **STORED) == 40)
    scrape = read_metrics(node.admin)
    shares = [scrape.value("skyoap_worker_stored_total", **STORED, process=str(k)) for k in (0, 1)]
    assert all(share > 0 for share in shares), shares
    assert sum(shares) == scrape.total("skyoap_worker_stored_total", **STORED) == 40
    assert scrape.value("skyoap_node_worker_up") == 2
    assert stored_segments(config.es_hosts, config.es_index_prefix) == 40


def test_a_node_of_workers_stopped_under_load_loses_nothing(
    local_cluster: Callable[..., LocalCluster], es_server: ElasticsearchServer, redis_server: RedisServer
) -> None:
    """SIGTERM to the parent alone: it stops both workers, each the way a node
    stops, and exits once both have stored what they held."""
    cluster, node, config = start(local_cluster, es_server, redis_server)
    with AgentLoad(node.address, calls_per_s=10, segments_per_call=5, threads=4) as load:
        time.sleep(5)
        os.kill(node.pid, signal.SIGTERM)
        eventually(lambda: cluster.exited(node), timeout_s=300)
    log = Path(node.log).read_text()
    assert log.count("stopped (pid") == 3, log  # both workers' nodes, then the parent
    accepted = len(load.ledger.accepted)
    assert accepted > 0
    assert set(load.ledger.refused) <= ANSWERED, load.ledger.refused
    assert stored_segments(config.es_hosts, config.es_index_prefix) == accepted
    for level in Downsampling:
        assert stored_sums(config, level) == load.ledger.expected(level), level


def test_workers_on_the_embedded_storage_are_refused_saying_why(tmp_path: Path) -> None:
    out = subprocess.run(
        [*SKYOAP, "node", "--workers", "2", "--port", "0", "--embedded-path", str(tmp_path / "s.db")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == (
        "skyoap node: --workers 2: the embedded storage (SQLite) takes one writer, so a node on it is one "
        "process; run it with --workers 1, or use --storage elasticsearch with --cluster redis\n"
    )
