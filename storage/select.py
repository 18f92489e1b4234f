"""The storage selector: builds the storage the configuration names."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.config import NodeConfig, StorageKind
from storage.api import InventoryDAO, MetricsDAO, RecordDAO, SequenceAllocator, StateStore, StreamDAO


@dataclass
class OpenStorage:
    inventory: InventoryDAO
    metrics: MetricsDAO
    records: RecordDAO
    streams: StreamDAO
    state: StateStore
    sequences: SequenceAllocator

    def close(self) -> None:
        """Closes the allocator and the DAOs (which share one connection)."""
        self.sequences.close()
        for dao in (self.inventory, self.metrics, self.records, self.streams, self.state):
            dao.close()


def open_storage(config: NodeConfig) -> OpenStorage:
    if config.storage is StorageKind.ELASTICSEARCH:
        from storage.elasticsearch.client import ElasticsearchClient
        from storage.elasticsearch.inventory import ElasticsearchInventoryDAO
        from storage.elasticsearch.metrics import ElasticsearchMetricsDAO
        from storage.elasticsearch.records import ElasticsearchRecordDAO
        from storage.elasticsearch.streams import ElasticsearchStateStore, ElasticsearchStreamDAO
        from storage.redis.sequences import RedisSequenceAllocator

        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        allocator = RedisSequenceAllocator(config.redis_url, config.redis_key_prefix)
        return OpenStorage(
            ElasticsearchInventoryDAO(client),
            ElasticsearchMetricsDAO(client),
            ElasticsearchRecordDAO(client),
            ElasticsearchStreamDAO(client, allocator),
            ElasticsearchStateStore(client),
            allocator,
        )
    from storage.embedded.db import Database
    from storage.embedded.inventory import EmbeddedInventoryDAO
    from storage.embedded.metrics import EmbeddedMetricsDAO
    from storage.embedded.records import EmbeddedRecordDAO
    from storage.embedded.sequences import LocalSequenceAllocator
    from storage.embedded.streams import EmbeddedStateStore, EmbeddedStreamDAO

    db = Database(config.embedded_path)
    return OpenStorage(
        EmbeddedInventoryDAO(db),
        EmbeddedMetricsDAO(db),
        EmbeddedRecordDAO(db),
        EmbeddedStreamDAO(db),
        EmbeddedStateStore(db),
        LocalSequenceAllocator(),
    )


def open_streams(config: NodeConfig) -> tuple[StreamDAO, StateStore]:
    """What a consumer needs: topics to read (not to append to) and the shared
    state of consumer groups. No Redis: readers take no lock."""
    if config.storage is StorageKind.ELASTICSEARCH:
        from storage.elasticsearch.client import ElasticsearchClient
        from storage.elasticsearch.streams import ElasticsearchStateStore, ElasticsearchStreamDAO

        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        return ElasticsearchStreamDAO(client), ElasticsearchStateStore(client)
    from storage.embedded.db import Database
    from storage.embedded.streams import EmbeddedStateStore, EmbeddedStreamDAO

    db = Database(config.embedded_path)
    return EmbeddedStreamDAO(db), EmbeddedStateStore(db)


@contextlib.contextmanager
def streams_of(config: NodeConfig) -> Iterator[tuple[StreamDAO, StateStore]]:
    """``open_streams``, closed when the block ends."""
    streams, state = open_streams(config)
    try:
        yield streams, state
    finally:
        streams.close()
        state.close()
