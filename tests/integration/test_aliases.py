"""Network address aliases on real nodes: service A calls service B at
``b-host:8080`` and a database, ``mysql:3306``, nobody reports from. Once B's
entry spans have named the address A used, A's exit spans to it count for the
relation A -> B, whichever node took them and across restarts; the database
stays an address."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from skyoap.deploy.cluster import LocalCluster
from skyoap.model.metrics import (
    Downsampling,
    NetworkAddressAlias,
    ServiceInstanceRelationMetrics,
    ServiceRelationMetrics,
    minute_bucket,
)
from skyoap.proto.skywalking import tracing_pb2
from skyoap.storage.api import MetricsWrite
from skyoap.storage.config import StorageConfig, StorageKind
from skyoap.storage.elasticsearch import metrics as elasticsearch_metrics
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.wiring.config import NodeConfig
from tests.integration.cluster_support import metric
from tests.integration.helpers import eventually
from tests.integration.telemetry_data import collect, span
from tests.integration.test_cluster import storage_of

ROOT = Path(__file__).resolve().parents[2]
FAST = [
    "--metrics-persist-interval-s",
    "0.5",
    "--metrics-l1-flush-period-s",
    "0.2",
    "--alias-refresh-s",
    "0.5",
]


TOMCAT, HTTP_CLIENT, MYSQL_CONNECTOR = 1, 2, 33
"""The components of the spans, by SkyWalking's ids (the last reaches ``Mysql``)."""


def served_by_b(now: int, n: int) -> tracing_pb2.SegmentObject:
    """B's entry span of A's ``n``-th call: its reference names the address A used."""
    ref = tracing_pb2.SegmentReference(
        refType=tracing_pb2.CrossProcess, traceId=f"t{n}", parentTraceSegmentId=f"a{n}", parentSpanId=1,
        parentService="A", parentServiceInstance="a-1", parentEndpoint="job",
        networkAddressUsedAtPeer="b-host:8080",
    )  # fmt: skip
    entry = span(
        0, -1, tracing_pb2.Entry, now, 10, False, operationName="GET:/b", refs=[ref], componentId=TOMCAT
    )
    return tracing_pb2.SegmentObject(
        traceId=f"t{n}", traceSegmentId=f"b{n}", service="B", serviceInstance="b-1", spans=[entry]
    )


def called_by_a(now: int, n: int) -> tracing_pb2.SegmentObject:
    """A's ``n``-th job: it calls B at b-host:8080 (20 ms) and queries mysql:3306 (5 ms)."""
    spans = [
        span(0, -1, tracing_pb2.Local, now, 30, False, operationName="job"),
        span(1, 0, tracing_pb2.Exit, now, 20, False, operationName="GET:/b", peer="b-host:8080",
             componentId=HTTP_CLIENT),
        span(2, 0, tracing_pb2.Exit, now, 5, False, operationName="SELECT", peer="mysql:3306",
             spanLayer=tracing_pb2.Database, componentId=MYSQL_CONNECTOR),
    ]  # fmt: skip
    return tracing_pb2.SegmentObject(
        traceId=f"t{n}", traceSegmentId=f"a{n}", service="A", serviceInstance="a-1", spans=spans
    )


def relations(config: StorageConfig, minute: int) -> dict[tuple[str, ...], int]:
    """The calls of every service and instance relation stored for ``minute``."""
    storage = open_storage(config)
    try:
        found: dict[tuple[str, ...], int] = {}
        for m in storage.metrics.query(ServiceRelationMetrics, Downsampling.MINUTE, minute, minute):
            found[(m.source, m.dest, m.detect_point)] = m.calls
        for i in storage.metrics.query(ServiceInstanceRelationMetrics, Downsampling.MINUTE, minute, minute):
            found[(i.source_service, i.source_instance, i.dest_service, i.dest_instance, i.detect_point)] = (
                i.calls
            )
        return found
    finally:
        storage.close()


def aliases(config: StorageConfig, level: Downsampling) -> list[NetworkAddressAlias]:
    storage = open_storage(config)
    try:
        return storage.metrics.query(NetworkAddressAlias, level, 0, 999_999_999_999)
    finally:
        storage.close()


def expected(calls: int, client_calls: int) -> dict[tuple[str, ...], int]:
    """A -> B from both sides, and A -> mysql:3306 from A's, by service and instance."""
    return {
        ("A", "B", "server"): calls,
        ("A", "B", "client"): client_calls,
        ("A", "mysql:3306", "client"): client_calls,
        ("A", "a-1", "B", "b-1", "server"): calls,
        ("A", "a-1", "B", "b-1", "client"): client_calls,
        ("A", "a-1", "mysql:3306", "mysql:3306", "client"): client_calls,
    }


def storage_argv(config: StorageConfig) -> list[str]:
    if config.kind is StorageKind.EMBEDDED:
        return ["--storage", "embedded", "--embedded-path", config.embedded_path]
    return [
        "--storage", "elasticsearch", "--es-hosts", config.es_hosts,
        "--es-index-prefix", config.es_index_prefix,
        "--redis-url", config.redis_url, "--redis-key-prefix", config.redis_key_prefix,
    ]  # fmt: skip


@contextmanager
def node_process(config: StorageConfig, workdir: Path) -> Iterator[str]:
    """A ``skyoap node`` on ``config``'s storage, as an operator runs it; its
    address. Its log goes to a file in ``workdir``, shown if it fails."""
    argv = [sys.executable, "-m", "skyoap.deploy.cli", "node", "--host", "127.0.0.1", "--port", "0",
            "--query-port", "-1", "--spill-dir", str(workdir / "spill"),
            *storage_argv(config), *FAST]  # fmt: skip
    log = workdir / f"node-{time.monotonic_ns()}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        listening = re.fullmatch(r"skyoap node listening on (\S+) admin - internal - query -\n", line)
        assert listening, f"unexpected first line {line!r}; log: {log.read_text()[-4000:]}"
        yield listening.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-4000:]


def test_a_call_to_an_aliased_address_is_one_relation_and_the_alias_survives_a_restart(
    node_config: NodeConfig, tmp_path: Path
) -> None:
    config = node_config.storage
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    with node_process(config, tmp_path) as address:
        collect(address, [served_by_b(now, n) for n in range(3)])  # the alias is learned here
        collect(address, [called_by_a(now, n) for n in range(3)])
        eventually(lambda: relations(config, minute) == expected(3, 3))
        alias = NetworkAddressAlias(
            time_bucket=minute, address="b-host:8080", service="B", instance="b-1", last_seen=now
        )
        eventually(lambda: aliases(config, Downsampling.MINUTE) == [alias])
        eventually(lambda: aliases(config, Downsampling.DAY) == [alias.downsampled(Downsampling.DAY)])

    # A new node on the same storage reads the alias before it takes a call.
    with node_process(config, tmp_path) as address:
        collect(address, [called_by_a(now, 3)])
        eventually(lambda: relations(config, minute) == expected(3, 4))


def test_a_receiver_measures_through_an_alias_another_receiver_learned(
    local_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = local_cluster(*FAST)
    cluster.add("aggregator")
    callee_side, caller_side = cluster.add("receiver"), cluster.add("receiver")
    now = int(time.time() * 1000)
    minute = minute_bucket(now)
    collect(callee_side.address, [served_by_b(now, 0)])
    # The alias is stored, then read by the other receiver at its next refresh.
    eventually(lambda: len(aliases(storage_of(cluster), Downsampling.MINUTE)) == 1)
    eventually(lambda: metric(caller_side, "skyoap_aliases") == 1)
    assert metric(callee_side, "skyoap_aliases") == 1  # learned at once where it was seen
    collect(caller_side.address, [called_by_a(now, 0)])
    eventually(lambda: relations(storage_of(cluster), minute) == expected(1, 1))


@pytest.fixture
def page_of_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elasticsearch's newest rows in pages of two entities, so that a few rows take several pages."""
    monkeypatch.setattr(elasticsearch_metrics, "LATEST_PAGE", 2)


def test_storage_finds_the_newest_row_of_each_address_since_a_bucket(
    storage: OpenStorage, page_of_two: None
) -> None:
    storage.metrics.install([NetworkAddressAlias])
    first = 202611211905

    def seen(address: str, service: str, minutes_later: int) -> NetworkAddressAlias:
        bucket = first + minutes_later
        last_seen = 1_795_287_900_000 + minutes_later * 60_000 + 7
        return NetworkAddressAlias(
            time_bucket=bucket, address=address, service=service, instance=f"{service}-1", last_seen=last_seen
        )

    rows = [seen("a:1", "alpha", 0), seen("a:1", "beta", 2), seen("b:1", "gamma", 1)]
    rows += [seen(f"c:{n}", "delta", 0) for n in range(5)]
    written = storage.metrics.put(
        NetworkAddressAlias, Downsampling.MINUTE, [MetricsWrite(None, r, {}) for r in rows]
    )
    assert not written.retry and not written.failed

    def newest(since: int) -> list[tuple[str, str, int]]:
        found = storage.metrics.latest(NetworkAddressAlias, Downsampling.MINUTE, since, "address")
        return sorted((r.address, r.service, r.time_bucket) for r in found)

    everything = [("a:1", "beta", first + 2), ("b:1", "gamma", first + 1)]
    everything += [(f"c:{n}", "delta", first) for n in range(5)]
    eventually(lambda: newest(first) == everything)
    assert newest(first + 1) == [("a:1", "beta", first + 2), ("b:1", "gamma", first + 1)]
    assert newest(first + 3) == []
    with pytest.raises(ValueError, match="no column"):
        storage.metrics.latest(NetworkAddressAlias, Downsampling.MINUTE, first, "nothing")
