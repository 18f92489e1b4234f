"""The storage selector: builds the storage the configuration names."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import NodeConfig, StorageKind
from storage.api import InventoryDAO, SequenceAllocator


@dataclass
class OpenStorage:
    inventory: InventoryDAO
    sequences: SequenceAllocator

    def close(self) -> None:
        self.sequences.close()
        self.inventory.close()


def open_storage(config: NodeConfig) -> OpenStorage:
    if config.storage is StorageKind.ELASTICSEARCH:
        from storage.elasticsearch.client import ElasticsearchClient
        from storage.elasticsearch.inventory import ElasticsearchInventoryDAO
        from storage.redis.sequences import RedisSequenceAllocator

        client = ElasticsearchClient(config.es_hosts, config.es_index_prefix)
        return OpenStorage(
            ElasticsearchInventoryDAO(client),
            RedisSequenceAllocator(config.redis_url, config.redis_key_prefix),
        )
    from storage.embedded.inventory import EmbeddedInventoryDAO
    from storage.embedded.sequences import LocalSequenceAllocator

    return OpenStorage(EmbeddedInventoryDAO(config.embedded_path), LocalSequenceAllocator())
