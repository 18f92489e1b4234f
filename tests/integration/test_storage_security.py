"""Storage with its security on: an Elasticsearch that serves HTTPS with a
certificate of its own CA (made by its ``elasticsearch-certutil``) and lets in
only its users, and a Redis that requires a password."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from skyoap.agent import Agent
from skyoap.deploy.servers import ElasticsearchServer, RedisServer
from skyoap.model.inventory import ServiceInventory
from skyoap.storage.api import StorageError
from skyoap.storage.config import StorageKind
from skyoap.wiring.config import NodeConfig
from skyoap.wiring.node import Node
from tests.integration.helpers import stored


@pytest.fixture(scope="module")
def secured_es() -> Iterator[ElasticsearchServer]:
    server = ElasticsearchServer(secured=True).start()  # its data goes with it
    yield server
    server.stop()


@pytest.fixture(scope="module")
def locked_redis() -> Iterator[RedisServer]:
    server = RedisServer(password="redis-s3cret").start()
    yield server
    server.stop()


@pytest.fixture
def config(secured_es: ElasticsearchServer, locked_redis: RedisServer) -> NodeConfig:
    prefix = f"t{uuid.uuid4().hex[:12]}"
    return NodeConfig().with_options(
        host="127.0.0.1",
        port=0,
        query_port=0,
        storage=StorageKind.ELASTICSEARCH,
        es_hosts=secured_es.url,
        es_username=secured_es.username,
        es_password=secured_es.password,
        es_ca=str(secured_es.ca_path),
        es_index_prefix=prefix,
        redis_url=locked_redis.url,
        redis_key_prefix=prefix,
    )


def test_a_node_with_the_credentials_registers_and_stores(config: NodeConfig) -> None:
    assert config.storage.es_hosts.startswith("https://") and ":redis-s3cret@" in config.storage.redis_url
    node = Node(config).start()
    try:
        agent = Agent(node.address, "secured-svc", retry_interval_s=0.1)
        ids = agent.register(timeout_s=60)
        agent.close()
        assert (ids.service_id, ids.instance_id) == (1, 1)
        assert [s.name for s in stored(config.storage, ServiceInventory)] == ["secured-svc"]
    finally:
        node.close()


def test_wrong_credentials_stop_the_node_at_start_and_say_which(
    config: NodeConfig, locked_redis: RedisServer
) -> None:
    with pytest.raises(StorageError) as refused:
        Node(config.with_options(es_password="not-it")).start()
    assert "Elasticsearch refused the node's credentials while " in str(refused.value)
    assert str(refused.value).endswith("(401): check --es-username and --es-password, or --es-api-key")

    where = f"127.0.0.1:{locked_redis.port}"
    for url in (f"redis://:not-it@{where}/0", f"redis://{where}/0"):
        with pytest.raises(ValueError) as refused_redis:
            Node(config.with_options(redis_url=url)).start()
        assert str(refused_redis.value).startswith(
            f"Redis at {where} refused the credentials of --redis-url ("
        )

    with pytest.raises(ValueError, match="--es-username and --es-password go together"):
        Node(config.with_options(es_password="")).start()
