"""The storage section of the configuration: all that storage, the consumer
client and the Spark source need to know."""

from __future__ import annotations

import enum
import os
import urllib.parse
from dataclasses import dataclass

from skyoap.runtime.config import option


class StorageKind(enum.Enum):
    EMBEDDED = "embedded"
    ELASTICSEARCH = "elasticsearch"


@dataclass(frozen=True)
class StorageConfig:
    kind: StorageKind = option(StorageKind.EMBEDDED, "where L2 persists", name="storage")
    embedded_path: str = option("skyoap-data/skyoap.db", "SQLite file of the embedded storage")
    es_hosts: str = option("http://127.0.0.1:9200", "Elasticsearch URLs, comma separated")
    es_index_prefix: str = option("skyoap", "prefix of every Elasticsearch index the node creates")
    es_username: str = option("", "user Elasticsearch authenticates (basic auth), with --es-password")
    es_password: str = option("", "password of --es-username (better given as SKYOAP_ES_PASSWORD)")
    es_api_key: str = option("", "Elasticsearch API key (its encoded form), instead of a user")
    es_ca: str = option("", "PEM CA certificate that Elasticsearch's HTTPS certificate is checked against")
    es_request_timeout_s: float = option(
        30.0, "how long one Elasticsearch request may take; a write that times out is confirmed later"
    )
    redis_url: str = option(
        "redis://127.0.0.1:6379/0",
        "Redis for the global lock and sequences (elasticsearch storage); rediss:// for TLS",
    )
    redis_ca: str = option(
        "",
        "PEM CA certificate that Redis's TLS certificate is checked against (rediss:// URLs); "
        "a user and password go in the URL: redis://USER:PASSWORD@HOST:PORT/DB",
    )
    redis_key_prefix: str = option("skyoap", "prefix of every Redis key the node uses")
    topic_lease_s: float = option(
        30.0,
        "how long a writer may hold a range of topic offsets open; past it, readers pass the range "
        "and the writer publishes what it wrote there again at a new one",
    )

    def identity(self) -> str:
        """Which storage this is, in words that stay the same across starts:
        what a node keeps for a storage (its spills) is for that storage only."""
        if self.kind is StorageKind.ELASTICSEARCH:
            # Without any user and password a URL carries: the identity is written to files.
            urls = [urllib.parse.urlsplit(h.strip()) for h in self.es_hosts.split(",") if h.strip()]
            hosts = ",".join(sorted(f"{u.scheme}://{u.hostname}:{u.port}" for u in urls))
            return f"elasticsearch:{hosts}:{self.es_index_prefix}"
        return f"embedded:{os.path.abspath(self.embedded_path)}"
