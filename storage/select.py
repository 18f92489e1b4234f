"""The storage selector: builds the storage the configuration names."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import NodeConfig, StorageKind
from storage.api import InventoryDAO, MetricsDAO, RecordDAO, SequenceAllocator


@dataclass
class OpenStorage:
    inventory: InventoryDAO
    metrics: MetricsDAO
    records: RecordDAO
    sequences: SequenceAllocator

    def close(self) -> None:
        """Closes the allocator and the DAOs (which share one connection)."""
        self.sequences.close()
        self.inventory.close()
        self.metrics.close()
        self.records.close()


def open_storage(config: NodeConfig) -> OpenStorage:
    if config.storage is StorageKind.ELASTICSEARCH:
        from storage.elasticsearch.client import ElasticsearchClient
        from storage.elasticsearch.inventory import ElasticsearchInventoryDAO
        from storage.elasticsearch.metrics import ElasticsearchMetricsDAO
        from storage.elasticsearch.records import ElasticsearchRecordDAO
        from storage.redis.sequences import RedisSequenceAllocator

        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        return OpenStorage(
            ElasticsearchInventoryDAO(client),
            ElasticsearchMetricsDAO(client),
            ElasticsearchRecordDAO(client),
            RedisSequenceAllocator(config.redis_url, config.redis_key_prefix),
        )
    from storage.embedded.db import Database
    from storage.embedded.inventory import EmbeddedInventoryDAO
    from storage.embedded.metrics import EmbeddedMetricsDAO
    from storage.embedded.records import EmbeddedRecordDAO
    from storage.embedded.sequences import LocalSequenceAllocator

    db = Database(config.embedded_path)
    return OpenStorage(
        EmbeddedInventoryDAO(db), EmbeddedMetricsDAO(db), EmbeddedRecordDAO(db), LocalSequenceAllocator()
    )
