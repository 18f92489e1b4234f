"""The configuration of a node: the sections each package declares beside
the code it configures (``edge/config.py``'s server, ``query/config.py``,
``storage/config.py``, ``remote/config.py``'s cluster, ``receiver/config.py``'s
limits and analysis, ``aggregator/config.py``'s topics and time to live,
``alarm/config.py``) and the buffers and workers of the chains this package
wires, composed into one ``NodeConfig`` with the rules that span sections.
Loaded once at start-up (see ``deploy/cli.py``: every field is a ``--option``
and a ``SKYOAP_`` variable) and passed down explicitly."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from skyoap.aggregator.config import TopicsConfig, TtlConfig
from skyoap.alarm.config import AlarmConfig
from skyoap.edge.config import ServerConfig
from skyoap.query.config import QueryConfig
from skyoap.receiver.config import AnalysisConfig, LimitsConfig
from skyoap.remote.config import ClusterConfig, ClusterKind
from skyoap.runtime.buffer import BufferStrategy
from skyoap.runtime.config import option, option_name, section
from skyoap.storage.config import StorageConfig, StorageKind


@dataclass(frozen=True)
class WorkersConfig:
    """Buffer queues, the drain pools that empty them, and the workers' periods."""

    l1_channels: int = option(2, "channels of each L1 (distinct) worker's buffer queue")
    l1_buffer_size: int = option(
        10_000,
        "items per channel of each registration L1 queue (telemetry's are bounded by the memory budget)",
    )
    l1_strategy: BufferStrategy = option(
        BufferStrategy.BLOCKING, "what a full registration L1 queue does: blocking or if_possible (drop)"
    )
    l1_pool_size: int = option(2, "threads of the REGISTER_L1 drain pool shared by every L1 worker")
    l2_channels: int = option(1, "channels of each L2 (persistent) worker's buffer queue")
    l2_buffer_size: int = option(
        10_000,
        "items per channel of each registration L2 queue (telemetry's are bounded by the memory budget)",
    )
    l2_strategy: BufferStrategy = option(
        BufferStrategy.BLOCKING, "what a full registration L2 queue does: blocking or if_possible (drop)"
    )
    l2_pool_size: int = option(2, "threads of the REGISTER_L2 drain pool shared by every L2 worker")
    l2_batch_size: int = option(5000, "most items one L2 storage round (reads, lock, inserts) takes")
    metrics_l1_flush_period_s: float = option(
        0.5, "how long a receiver merges each metric before sending it on to its aggregator"
    )
    metrics_persist_interval_s: float = option(
        3.0, "how often an aggregator adds what it merged to the stored metrics, in bulk"
    )
    record_bulk_size: int = option(2000, "most records one bulk write carries")
    record_pool_size: int = option(1, "threads of the RECORD_PERSIST drain pool")
    heartbeat_expiry_s: float = option(
        120.0, "an instance with no heartbeat for this long is marked inactive"
    )
    housekeeping_interval_s: float = option(
        10.0,
        "how often inactive instances are looked for, and the inventory and metrics topics trimmed "
        "to their retention",
    )
    cache_size: int = option(1_000_000, "names kept in the inventory cache")
    cache_max_age_s: float = option(
        3600.0,
        "a cached name's id is asked of storage again after this long (a name time to live "
        "removed is then registered again)",
    )
    miss_recheck_s: float = option(
        0.5, "a name storage did not have is asked of storage again after this long"
    )
    resend_after_s: float = option(
        5.0, "a name still without an id is handed to L1 again after this long, not sooner"
    )
    spill_dir: str = option(
        "skyoap-data/spill",
        "directory where metrics and records storage did not take by the close are kept, to be "
        "stored at the next start on the same directory and storage (empty: dropped and counted)",
    )


@dataclass(frozen=True)
class NodeConfig:
    server: ServerConfig = section(ServerConfig, "server")
    query: QueryConfig = section(QueryConfig, "query endpoint")
    storage: StorageConfig = section(StorageConfig, "storage")
    cluster: ClusterConfig = section(ClusterConfig, "cluster")
    workers: WorkersConfig = section(WorkersConfig, "buffers and workers")
    limits: LimitsConfig = section(LimitsConfig, "limits of agent calls and telemetry")
    topics: TopicsConfig = section(TopicsConfig, "topics")
    ttl: TtlConfig = section(TtlConfig, "time to live")
    analysis: AnalysisConfig = section(AnalysisConfig, "analysis")
    alarm: AlarmConfig = section(AlarmConfig, "alarms")

    def with_options(self, **values: Any) -> NodeConfig:
        """A copy with the fields named by their options changed, whatever
        section holds them: ``config.with_options(port=0, storage=StorageKind.ELASTICSEARCH)``."""
        changes: dict[str, dict[str, Any]] = {}
        left = dict(values)
        for holder in dataclasses.fields(self):
            for f in dataclasses.fields(getattr(self, holder.name)):
                if option_name(f) in left:
                    changes.setdefault(holder.name, {})[f.name] = left.pop(option_name(f))
        if left:
            raise TypeError(f"no such option: {', '.join(sorted(left))}")
        return dataclasses.replace(
            self,
            **{s: dataclasses.replace(getattr(self, s), **fields) for s, fields in changes.items()},
        )

    def check(self) -> None:
        """Refuses a configuration that cannot work, saying why: the rules
        across sections, then each section's own."""
        self._check_processes()
        if self.cluster.kind is ClusterKind.REDIS and self.storage.kind is StorageKind.EMBEDDED:
            raise ValueError("nodes of a cluster must share their storage: use --storage elasticsearch")
        if self.storage.topic_lease_s <= self.topics.commit_interval_s:
            raise ValueError(
                f"--topic-lease-s ({self.storage.topic_lease_s:g}) must be longer than "
                f"--topic-commit-interval-s ({self.topics.commit_interval_s:g}): a range is completed "
                "only at a commit, and one whose lease ran out first is written again"
            )
        if self.cluster.cluster_secret and self.cluster.cluster_secret == self.server.auth_token:
            raise ValueError(
                "--cluster-secret must differ from --auth-token: whoever holds the agent token must not be "
                "able to hand L1 results to the internal port"
            )
        self._check_query_token()
        parts = (
            self.server,
            self.query,
            self.cluster,
            self.limits,
            self.topics,
            self.ttl,
            self.analysis,
            self.alarm,
        )
        for part in parts:
            part.check()

    def _check_processes(self) -> None:
        n = self.server.processes
        if n > 1 and self.storage.kind is StorageKind.EMBEDDED:
            raise ValueError(
                f"--workers {n}: the embedded storage (SQLite) takes one writer, so a node on it is one "
                "process; run it with --workers 1, or use --storage elasticsearch with --cluster redis"
            )
        if n > 1 and self.cluster.kind is ClusterKind.STANDALONE:
            raise ValueError(
                f"--workers {n}: each worker is a member of a cluster, with an internal port of its own "
                "for the others' L1 results; run it with --cluster redis (and --cluster-secret or "
                "--cluster-ca, as every node of a cluster), or with --workers 1"
            )

    def _check_query_token(self) -> None:
        token = self.query.token
        if token and token in (self.server.auth_token, self.cluster.cluster_secret):
            raise ValueError(
                "--query-token must differ from --auth-token and --cluster-secret: whoever holds what "
                "agents or nodes send must not be able to read every query answer"
            )
