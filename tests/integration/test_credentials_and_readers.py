"""Credentials stay with their user: a local cluster's nodes get them in
their environment, never on a command line anyone can read, and its state
file is its owner's only. Commands that read create nothing in what they
read, and say when there is nothing stored."""

from __future__ import annotations

import contextlib
import io
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from skyoap.deploy.cli import main
from skyoap.deploy.cluster import LocalCluster
from skyoap.deploy.servers import ElasticsearchServer, RedisServer

REDIS_PASSWORD = "redis-s3cret"
SECRETS = (REDIS_PASSWORD, "es-s3cret", "token-s3cret")


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[RedisServer]:
    server = RedisServer(password=REDIS_PASSWORD).start()
    yield server
    server.stop()


def test_a_local_clusters_nodes_carry_no_credential_on_their_command_line(
    es_server: ElasticsearchServer, locked_redis: RedisServer, tmp_path: Path
) -> None:
    assert REDIS_PASSWORD in locked_redis.url
    cluster = LocalCluster.create(
        tmp_path / "cluster",
        locked_redis.url,
        es_server.url,
        ["--auth-token=token-s3cret", "--es-username", "skyoap", "--es-password", "es-s3cret"],
    )
    try:
        node = cluster.add("mixed")  # it started: its credentials reached it
        cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes().decode()
        assert "skyoap.deploy.cli" in cmdline
        assert [s for s in SECRETS if s in cmdline] == []
        mode = stat.S_IMODE(cluster.state_file.stat().st_mode)
        assert mode == 0o600, oct(mode)
    finally:
        cluster.down()


def es_lists(url: str) -> tuple[list[str], list[str]]:
    """Every index and every index template of the Elasticsearch at ``url``."""
    with Elasticsearch(url) as es:
        indices = sorted(es.indices.get(index="*", expand_wildcards="all"))
        templates = sorted(t["name"] for t in es.indices.get_index_template()["index_templates"])
    return indices, templates


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.mark.parametrize(
    "command", [["query", "services"], ["query", "segments"], ["inventory"], ["consumer"]]
)
def test_reading_an_elasticsearch_with_nothing_stored_creates_nothing(
    es_server: ElasticsearchServer, redis_server: RedisServer, command: list[str]
) -> None:
    prefix = f"empty{uuid.uuid4().hex[:8]}"
    before = es_lists(es_server.url)
    code, out = run(
        *command, "--storage", "elasticsearch", "--es-hosts", es_server.url, "--es-index-prefix", prefix,
        "--redis-url", redis_server.url,
    )  # fmt: skip
    assert es_lists(es_server.url) == before
    assert code == 0
    assert out.startswith(f"nothing is stored: Elasticsearch has no index named {prefix}_*")


@pytest.mark.parametrize("command", [["query", "services"], ["inventory"], ["consumer"]])
def test_reading_a_missing_embedded_storage_creates_no_file(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "data" / "skyoap.db"
    code, out = run(*command, "--storage", "embedded", "--embedded-path", str(path))
    assert list(tmp_path.iterdir()) == []
    assert code == 0
    assert out.startswith(f"nothing is stored: there is no embedded storage at {path}")
