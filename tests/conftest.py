"""Fixtures shared by every test: real servers started once per session, and
nodes built on the storage a test asks for."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ES_VERSION, ElasticsearchServer, RedisServer
from skyoap.storage.config import StorageKind
from skyoap.storage.select import OpenStorage, open_storage
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.browser import browser, shots

__all__ = ["browser", "shots"]
"""Fixtures of the web UI's tests, defined once: a second Playwright in one
process cannot start beside the first."""

STORAGES = ["embedded", "elasticsearch"]
ROOT = Path(__file__).resolve().parents[1]


def pytest_report_header() -> list[str]:
    """The servers and clients the tests run that no lock pins: Debian serves
    each package at its newest build alone, so when one changes under the
    tests, the run says which."""
    postgres = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    programs = {
        "Redis": (shutil.which("redis-server"), "--version"),
        "PostgreSQL": (str(postgres[-1]) if postgres else None, "--version"),
        "Chromium": (shutil.which("chromium"), "--version"),
        "promtool": (str(ROOT / ".tools" / "promtool"), "--version"),
        "Java": (shutil.which("java"), "-version"),
    }
    found = [f"Elasticsearch: {ES_VERSION} (pinned)"]
    for name, (program, flag) in programs.items():
        said = "not installed"
        if program is not None:
            with contextlib.suppress(OSError, IndexError, subprocess.TimeoutExpired):
                done = subprocess.run([program, flag], capture_output=True, text=True, timeout=30)
                said = (done.stdout or done.stderr).strip().splitlines()[0]
        found.append(f"{name}: {said}")
    return found


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def es_server() -> Iterator[ElasticsearchServer]:
    server = ElasticsearchServer().start()
    yield server
    server.stop()


@pytest.fixture(params=STORAGES)
def node_config(request: pytest.FixtureRequest, tmp_path) -> Iterator[NodeConfig]:  # type: ignore[no-untyped-def]
    """A mixed node's configuration on the storage named by the parameter, with
    its own index and key prefix, wiped after the test."""
    base = NodeConfig().with_options(
        host="127.0.0.1",
        port=0,
        internal_port=0,
        query_port=0,
        housekeeping_interval_s=0.5,
        remote_refresh_interval_s=0.5,
    )
    if request.param == "embedded":
        yield base.with_options(storage=StorageKind.EMBEDDED, embedded_path=str(tmp_path / "skyoap.db"))
        return
    es: ElasticsearchServer = request.getfixturevalue("es_server")
    rs: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"t{uuid.uuid4().hex[:12]}"
    yield base.with_options(
        storage=StorageKind.ELASTICSEARCH,
        es_hosts=es.url,
        es_index_prefix=prefix,
        redis_url=rs.url,
        redis_key_prefix=prefix,
    )
    wipe(es.url, rs.url, prefix)


def wipe(es_url: str, redis_url: str, prefix: str) -> None:
    """Deletes what a test stored under ``prefix``."""
    from elasticsearch import Elasticsearch

    with Elasticsearch(es_url) as client:
        client.indices.delete(index=f"{prefix}_*", ignore_unavailable=True)
    r = redis.Redis.from_url(redis_url)
    keys = list(r.scan_iter(f"{prefix}:*"))
    if keys:
        r.delete(*keys)
    r.close()


# Membership changes are noticed in about a second, so that the tests of
# failures and scaling do not wait for the production defaults.
FAST_CLUSTER = [
    "--cluster-heartbeat-s", "0.3",
    "--cluster-expiry-s", "1.5",
    "--remote-refresh-interval-s", "0.5",
]  # fmt: skip


@pytest.fixture
def local_cluster(
    es_server: ElasticsearchServer, redis_server: RedisServer, tmp_path: Path
) -> Iterator[Callable[..., LocalCluster]]:
    """Makes clusters whose nodes are separate ``skyoap node`` processes on the
    session's Redis and Elasticsearch; stops them and wipes their data after."""
    made: list[LocalCluster] = []

    def make(*node_options: str) -> LocalCluster:
        cluster = LocalCluster.create(
            tmp_path / f"cluster-{len(made)}", redis_server.url, es_server.url, [*FAST_CLUSTER, *node_options]
        )
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.down()
        wipe(es_server.url, redis_server.url, cluster.state.prefix)


@pytest.fixture
def storage(node_config: NodeConfig) -> Iterator[OpenStorage]:
    """The storage of ``node_config``, opened as a node opens it."""
    opened = open_storage(node_config.storage)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession (two cores) for the session's Spark tests."""
    from skyoap.analytics.spark import session

    s = session()
    yield s
    s.stop()


@pytest.fixture
def start_node() -> Iterator[Callable[[NodeConfig], Node]]:
    """Starts nodes in this process; every one is closed after the test."""
    nodes: list[Node] = []

    def start(config: NodeConfig) -> Node:
        node = Node(config).start()
        nodes.append(node)
        return node

    yield start
    for n in nodes:
        n.close()
