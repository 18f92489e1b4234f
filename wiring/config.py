"""The configuration of a node: typed, loaded once at start-up (see
``deploy/cli.py``: every field is a ``--option`` and a ``SKYOAP_`` variable) and
passed down explicitly."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from remote.cluster import Role
from remote.selector import SelectorKind
from runtime.buffer import BufferStrategy


class StorageKind(enum.Enum):
    EMBEDDED = "embedded"
    ELASTICSEARCH = "elasticsearch"


class ClusterKind(enum.Enum):
    STANDALONE = "standalone"
    """One node that routes to itself."""
    REDIS = "redis"
    """Nodes register in Redis with a time-to-live their heartbeats refresh."""


def _opt(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class NodeConfig:
    role: Role = _opt(
        Role.MIXED, "what the node does: receiver (agent traffic, L1), aggregator (L2), or both"
    )
    host: str = _opt("0.0.0.0", "address the gRPC server binds")
    port: int = _opt(11800, "gRPC port for agents and other nodes (0 picks a free one)")
    advertised_host: str = _opt("127.0.0.1", "address other nodes use to reach this one")
    storage: StorageKind = _opt(StorageKind.EMBEDDED, "where L2 persists")
    embedded_path: str = _opt("skyoap-data/skyoap.db", "SQLite file of the embedded storage")
    es_hosts: str = _opt("http://127.0.0.1:9200", "Elasticsearch URLs, comma separated")
    es_index_prefix: str = _opt("skyoap", "prefix of every Elasticsearch index the node creates")
    redis_url: str = _opt(
        "redis://127.0.0.1:6379/0", "Redis for the global lock and sequences (elasticsearch storage)"
    )
    redis_key_prefix: str = _opt("skyoap", "prefix of every Redis key the node uses")

    cluster: ClusterKind = _opt(ClusterKind.STANDALONE, "how nodes find each other")
    node_name: str = _opt("", "name of the node in the cluster (default: role@advertised address)")
    cluster_heartbeat_s: float = _opt(2.0, "how often the node renews its registration in the cluster")
    cluster_expiry_s: float = _opt(6.0, "a node that has not renewed its registration for this long is gone")
    inventory_selector: SelectorKind = _opt(
        SelectorKind.FOREVER_FIRST,
        "which aggregator gets each inventory name; forever-first keeps one writer allocating ids",
    )
    remote_buffer_size: int = _opt(20_000, "items each remote client holds for its target node")
    remote_park_size: int = _opt(
        100_000, "items held while no aggregator is known; past that they are dropped and counted"
    )

    l1_channels: int = _opt(2, "channels of each L1 (distinct) worker's buffer queue")
    l1_buffer_size: int = _opt(10_000, "items per channel of each L1 buffer queue")
    l1_strategy: BufferStrategy = _opt(
        BufferStrategy.BLOCKING, "what a full L1 queue does: blocking or if_possible (drop)"
    )
    l1_max_wait_s: float = _opt(
        5.0, "how long an agent call waits for room in a full L1 queue before it is told to come back later"
    )
    l1_pool_size: int = _opt(2, "threads of the REGISTER_L1 drain pool shared by every L1 worker")
    l2_channels: int = _opt(1, "channels of each L2 (persistent) worker's buffer queue")
    l2_buffer_size: int = _opt(10_000, "items per channel of each L2 buffer queue")
    l2_strategy: BufferStrategy = _opt(
        BufferStrategy.BLOCKING, "what a full L2 queue does: blocking or if_possible (drop)"
    )
    l2_pool_size: int = _opt(2, "threads of the REGISTER_L2 drain pool shared by every L2 worker")
    l2_batch_size: int = _opt(5000, "most items one L2 storage round (reads, lock, inserts) takes")

    metrics_l1_flush_period_s: float = _opt(
        0.5, "how long a receiver merges each metric before sending it on to its aggregator"
    )
    metrics_persist_interval_s: float = _opt(
        3.0, "how often an aggregator adds what it merged to the stored metrics, in bulk"
    )
    metrics_max_pending: int = _opt(
        500_000, "metric rows per level an aggregator holds while storage does not take them"
    )
    record_buffer_size: int = _opt(50_000, "segments or log lines waiting to be stored, per record type")
    record_bulk_size: int = _opt(2000, "most records one bulk write carries")
    record_pool_size: int = _opt(1, "threads of the RECORD_PERSIST drain pool")
    topic_partitions: int = _opt(4, "partitions of each topic, fixed when storage first creates the topic")
    topic_retention_s: float = _opt(3 * 86_400.0, "topics keep records younger than this")
    topic_retention_records: int = _opt(10_000_000, "most records one topic partition keeps")

    heartbeat_expiry_s: float = _opt(120.0, "an instance with no heartbeat for this long is marked inactive")
    housekeeping_interval_s: float = _opt(
        10.0, "how often inactive instances are looked for, and topics trimmed to their retention"
    )
    remote_refresh_interval_s: float = _opt(5.0, "how often the list of remote target nodes is refreshed")

    miss_recheck_s: float = _opt(0.5, "a name storage did not have is asked of storage again after this long")
    resend_after_s: float = _opt(
        5.0, "a name still without an id is handed to L1 again after this long, not sooner"
    )
    max_name_length: int = _opt(500, "longest name (in characters) a registration may carry")
    max_properties_chars: int = _opt(16_384, "most characters of tags and properties one name may carry")
    telemetry_max_age_s: float = _opt(
        3 * 86_400.0, "segments, logs and meters time-stamped longer ago than this are refused"
    )
    telemetry_max_ahead_s: float = _opt(
        600.0, "segments, logs and meters time-stamped further ahead of the node's clock are refused"
    )
    max_batch_items: int = _opt(1000, "most names one registration call may carry")
    max_message_bytes: int = _opt(4 * 1024 * 1024, "largest gRPC message the node accepts")
    grpc_workers: int = _opt(16, "threads serving gRPC calls")
    cache_size: int = _opt(1_000_000, "names kept in the inventory cache")
    admin_port: int = _opt(-1, "HTTP port of /metrics and /healthz (-1: off, 0: a free one)")
