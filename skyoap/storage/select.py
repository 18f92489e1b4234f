"""The storage selector: builds the storage the configuration names."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from skyoap.model.inventory import INVENTORY_TYPES
from skyoap.model.metrics import METRICS_TYPES
from skyoap.model.records import RECORD_TYPES
from skyoap.model.topics import Topic
from skyoap.storage.api import (
    InventoryDAO,
    MetricsDAO,
    OffsetRanges,
    RecordDAO,
    SequenceAllocator,
    StateStore,
    TopicDAO,
)
from skyoap.storage.config import StorageConfig, StorageKind


@dataclass
class OpenStorage:
    inventory: InventoryDAO
    metrics: MetricsDAO
    records: RecordDAO
    topics: TopicDAO
    state: StateStore
    sequences: SequenceAllocator
    offsets: OffsetRanges
    """Where writers of records and rows get their topic offsets."""
    inventory_within: Callable[[float], InventoryDAO]
    """The inventory, read with one try of at most the given seconds (what an
    agent's call waits on); closing it closes nothing."""

    def install(self, partitions: int) -> None:
        """Creates what is missing of the indices, tables and topics (each
        topic of ``partitions``); each step leaves what exists as it is, so it
        can be run again."""
        self.inventory.install(INVENTORY_TYPES)
        self.metrics.install(METRICS_TYPES)
        self.records.install(RECORD_TYPES)
        self.topics.install({t.value: partitions for t in Topic})

    def close(self) -> None:
        """Closes the allocators and the DAOs (which share one connection)."""
        self.sequences.close()
        self.offsets.close()
        for dao in (self.inventory, self.metrics, self.records, self.topics, self.state):
            dao.close()


def open_storage(config: StorageConfig) -> OpenStorage:
    if config.kind is StorageKind.ELASTICSEARCH:
        from skyoap.storage.elasticsearch.client import DeadlineReads, ElasticsearchClient
        from skyoap.storage.elasticsearch.inventory import ElasticsearchInventoryDAO
        from skyoap.storage.elasticsearch.metrics import ElasticsearchMetricsDAO
        from skyoap.storage.elasticsearch.records import ElasticsearchRecordDAO
        from skyoap.storage.elasticsearch.topics import ElasticsearchStateStore, ElasticsearchTopicDAO
        from skyoap.storage.redis.connect import verify
        from skyoap.storage.redis.offsets import RedisOffsetRanges
        from skyoap.storage.redis.sequences import RedisSequenceAllocator

        client = ElasticsearchClient.of(config)
        verify(config.redis_url, config.redis_ca)  # the cluster's membership uses the same Redis
        allocator = RedisSequenceAllocator(config.redis_url, config.redis_key_prefix, config.redis_ca)
        return OpenStorage(
            ElasticsearchInventoryDAO(client),
            ElasticsearchMetricsDAO(client),
            ElasticsearchRecordDAO(client),
            ElasticsearchTopicDAO(client),
            ElasticsearchStateStore(client),
            allocator,
            RedisOffsetRanges(
                config.redis_url, config.redis_key_prefix, config.topic_lease_s, config.redis_ca
            ),
            lambda timeout_s: ElasticsearchInventoryDAO(client, DeadlineReads(client, timeout_s)),
        )
    from skyoap.storage.embedded.db import Database
    from skyoap.storage.embedded.inventory import EmbeddedInventoryDAO
    from skyoap.storage.embedded.metrics import EmbeddedMetricsDAO
    from skyoap.storage.embedded.offsets import LocalOffsetRanges
    from skyoap.storage.embedded.records import EmbeddedRecordDAO
    from skyoap.storage.embedded.sequences import LocalSequenceAllocator
    from skyoap.storage.embedded.topics import EmbeddedStateStore, EmbeddedTopicDAO

    db = Database(config.embedded_path)
    inventory = EmbeddedInventoryDAO(db)
    return OpenStorage(
        inventory,
        EmbeddedMetricsDAO(db),
        EmbeddedRecordDAO(db),
        EmbeddedTopicDAO(db),
        EmbeddedStateStore(db),
        LocalSequenceAllocator(),
        LocalOffsetRanges(),
        lambda timeout_s: inventory,  # a local file: reads wait only for the writes under way
    )


def nothing_stored(config: StorageConfig) -> str | None:
    """None if a node has installed its storage where ``config`` says; else
    what is missing, in words for the user. Creates nothing: readers ask it
    before they open a storage that may not exist."""
    if config.kind is StorageKind.ELASTICSEARCH:
        from skyoap.storage.elasticsearch.client import ElasticsearchClient

        client = ElasticsearchClient.of(config)
        try:
            if client.has_indices():
                return None
        finally:
            client.close()
        return (
            f"nothing is stored: Elasticsearch has no index named {config.es_index_prefix}_* "
            "(a node creates them when it first starts; check --es-hosts and --es-index-prefix)"
        )
    if Path(config.embedded_path).is_file():
        return None
    return (
        f"nothing is stored: there is no embedded storage at {config.embedded_path} "
        "(a node creates it when it first starts; check --embedded-path)"
    )


def open_topics(config: StorageConfig) -> tuple[TopicDAO, StateStore]:
    """What a consumer needs: topics to read and the shared state of consumer
    groups. No Redis: readers take no lock."""
    if config.kind is StorageKind.ELASTICSEARCH:
        from skyoap.storage.elasticsearch.client import ElasticsearchClient
        from skyoap.storage.elasticsearch.topics import ElasticsearchStateStore, ElasticsearchTopicDAO

        client = ElasticsearchClient.of(config)
        return ElasticsearchTopicDAO(client), ElasticsearchStateStore(client)
    from skyoap.storage.embedded.db import Database
    from skyoap.storage.embedded.topics import EmbeddedStateStore, EmbeddedTopicDAO

    db = Database(config.embedded_path)
    return EmbeddedTopicDAO(db), EmbeddedStateStore(db)


@contextlib.contextmanager
def topics_of(config: StorageConfig) -> Iterator[tuple[TopicDAO, StateStore]]:
    """``open_topics``, closed when the block ends."""
    topics, state = open_topics(config)
    try:
        yield topics, state
    finally:
        topics.close()
        state.close()
