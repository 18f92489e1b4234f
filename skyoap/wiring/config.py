"""The configuration of a node, in sections (server, query endpoint, storage,
cluster, buffers and workers, limits, topics, time to live, analysis), each a
frozen dataclass that reaches only the components of its concern. Loaded once
at start-up (see ``deploy/cli.py``: every field is a ``--option`` and a
``SKYOAP_`` variable) and passed down explicitly."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyoap.aggregator.housekeeping import Ttl
from skyoap.alarm.reload import load_checked
from skyoap.alarm.settings import SettingsError
from skyoap.model.checks import TelemetryLimits
from skyoap.model.metrics import ApdexThresholds, Downsampling
from skyoap.model.spans import SEARCHABLE_LOG_TAGS, SEARCHABLE_TRACE_TAGS
from skyoap.query.config import QueryConfig
from skyoap.query.context import TimesToLive
from skyoap.receiver import sampling
from skyoap.receiver.virtual import SlowThresholds, Thresholds
from skyoap.remote.cluster import Role
from skyoap.remote.selector import SelectorKind
from skyoap.runtime.buffer import BufferStrategy
from skyoap.runtime.config import option, option_name, section
from skyoap.storage.config import StorageConfig, StorageKind


class ClusterKind(enum.Enum):
    STANDALONE = "standalone"
    """One node that routes to itself."""
    REDIS = "redis"
    """Nodes register in Redis with a time-to-live their heartbeats refresh."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = option("0.0.0.0", "address the gRPC server binds")
    port: int = option(11800, "gRPC port for agents (0 picks a free one)")
    internal_port: int = option(
        11801,
        "gRPC port where aggregator and mixed nodes of a cluster take L1 results from other nodes "
        "(0 picks a free one; a standalone node opens none)",
    )
    advertised_host: str = option("127.0.0.1", "address other nodes use to reach this one")
    max_message_bytes: int = option(4 * 1024 * 1024, "largest gRPC message the node accepts")
    max_control_message_bytes: int = option(
        1024 * 1024,
        "largest message of a call that carries names or commands, not telemetry (registration, "
        "keep-alives, pings, configuration and profiling polls); a larger one is refused undecoded",
    )
    max_concurrent_calls: int = option(
        128,
        "most agent and node calls (streams included) served at once; past it a call is answered "
        "RESOURCE_EXHAUSTED (health checks are not counted)",
    )
    stream_idle_s: float = option(60.0, "a client stream that sends nothing for this long is closed")
    stream_max_age_s: float = option(
        600.0, "a stream (client streams, reflection, health watches) open this long is closed"
    )
    auth_token: str = option(
        "",
        "SkyWalking's agent token: every call but health checks must carry it as the gRPC metadata "
        "'authentication' (empty: none needed)",
    )
    tls_cert: str = option(
        "", "PEM certificate chain the agent port serves over TLS (read again when the file changes)"
    )
    tls_key: str = option("", "PEM private key of --tls-cert")
    admin_host: str = option("127.0.0.1", "address the admin HTTP server binds (its /metrics is open)")
    admin_port: int = option(-1, "HTTP port of /metrics and /healthz (-1: off, 0: a free one)")
    processes: int = option(
        1,
        "worker processes the node runs, one per core at most: each a member of the cluster with its "
        "own L1, L2 and memory budget, all sharing the agent port; worker K takes --internal-port + K "
        "(0: free ports), worker 0 serves the query port, and the admin port covers them all; more "
        "than one needs --cluster redis and --storage elasticsearch (docs/operations.md)",
        name="workers",
    )

    def check(self) -> None:
        if self.processes < 1:
            raise ValueError(f"--workers must be at least 1, not {self.processes}")
        if self.max_concurrent_calls < 1:
            raise ValueError(f"--max-concurrent-calls must be at least 1, not {self.max_concurrent_calls}")
        if self.stream_idle_s <= 0:
            raise ValueError(f"--stream-idle-s must be above 0, not {self.stream_idle_s:g}")
        if self.stream_max_age_s <= 0:
            raise ValueError(f"--stream-max-age-s must be above 0, not {self.stream_max_age_s:g}")
        _check_metadata("--auth-token", self.auth_token)
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("--tls-cert and --tls-key go together: give both or neither")


@dataclass(frozen=True)
class ClusterConfig:
    role: Role = option(
        Role.MIXED, "what the node does: receiver (agent traffic, L1), aggregator (L2), or both"
    )
    kind: ClusterKind = option(ClusterKind.STANDALONE, "how nodes find each other", name="cluster")
    node_name: str = option("", "name of the node in the cluster (default: role@advertised address)")
    heartbeat_s: float = option(
        2.0, "how often the node renews its registration in the cluster", name="cluster_heartbeat_s"
    )
    expiry_s: float = option(
        6.0, "a node that has not renewed its registration for this long is gone", name="cluster_expiry_s"
    )
    inventory_selector: SelectorKind = option(
        SelectorKind.FOREVER_FIRST,
        "which aggregator gets each inventory name; forever-first keeps one writer allocating ids",
    )
    remote_buffer_size: int = option(20_000, "items each remote client holds for its target node")
    remote_refresh_interval_s: float = option(5.0, "how often the list of remote target nodes is refreshed")
    cluster_ca: str = option(
        "",
        "PEM CA certificate of the cluster: with it, nodes talk to each other over mutual TLS and take "
        "L1 results only from, and route them only to, nodes with a certificate it signed",
    )
    cluster_cert: str = option(
        "", "PEM certificate (signed by --cluster-ca) this node presents to other nodes"
    )
    cluster_key: str = option("", "PEM private key of --cluster-cert")
    cluster_secret: str = option(
        "",
        "secret the nodes of a cluster send each other as the gRPC metadata 'skyoap-cluster-secret': "
        "the internal port refuses a call without it (never the agent token); a cluster needs it or "
        "--cluster-ca; give it through SKYOAP_CLUSTER_SECRET rather than the command line",
    )

    def check(self) -> None:
        tls = (self.cluster_ca, self.cluster_cert, self.cluster_key)
        if any(tls) and not all(tls):
            raise ValueError(
                "--cluster-ca, --cluster-cert and --cluster-key go together: give all three or none"
            )
        _check_metadata("--cluster-secret", self.cluster_secret)
        if self.kind is ClusterKind.STANDALONE and self.role is not Role.MIXED:
            raise ValueError(
                f"a {self.role.value} node needs other nodes: run it with --cluster redis "
                "(a standalone node must be mixed)"
            )
        if self.kind is ClusterKind.STANDALONE and self.cluster_ca:
            raise ValueError(
                "--cluster-ca is for the nodes of a cluster (--cluster redis): a standalone node has no peers"
            )
        if self.kind is ClusterKind.REDIS and not (self.cluster_secret or self.cluster_ca):
            raise ValueError(
                "a cluster node needs --cluster-ca (mutual TLS) or --cluster-secret (set "
                "SKYOAP_CLUSTER_SECRET to the same value on every node): without either, anyone who "
                "reaches the internal port could send L1 results for this cluster's L2 to merge and store"
            )


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
class LimitsConfig:
    """What one agent call may carry and how long it may take; more is refused
    with a status that says why."""

    call_deadline_s: float = option(
        5.0,
        "how long an agent call may take from its request's arrival (a stream's last message), "
        "whatever it waits on, before it is answered RESOURCE_EXHAUSTED or UNAVAILABLE; "
        "also how long a batch from another node waits for room in L2",
    )
    memory_limit_mb: int = option(
        256,
        "megabytes of accepted telemetry a node holds while it is combined, sent on or stored; "
        "calls that do not fit wait, then are refused whole",
    )

    max_name_length: int = option(500, "longest name (in characters) a registration may carry")
    max_properties_chars: int = option(16_384, "most characters of tags and properties one name may carry")
    max_batch_items: int = option(1000, "most names one registration call may carry")
    max_spans_per_segment: int = option(2000, "most spans one trace segment may carry")
    max_refs_per_span: int = option(500, "most references (parents) one span may carry")
    max_tags_per_item: int = option(128, "most tags one span or log line may carry")
    max_log_body_bytes: int = option(128 * 1024, "largest log body, in bytes")
    max_histogram_buckets: int = option(100, "most buckets one meter histogram may carry")
    endpoint_groups: str = option(
        "",
        "file of endpoint grouping rules: lines 'GROUP' ({name} matches one path segment) or "
        "'GROUP = REGEX', under optional [SERVICE] headers (docs/security.md#cardinality)",
    )
    max_services: int = option(
        10_000,
        "most services; past it new names count as the service (other), with their instances and endpoints",
    )
    max_endpoints_per_service: int = option(
        3000, "most endpoints a service has; past it new names count as the endpoint (other)"
    )
    max_instances_per_service: int = option(
        5000, "most instances a service has; past it new names count as the instance (other)"
    )
    max_network_addresses: int = option(
        50_000, "most peer addresses of all services; past it new ones count as the address (other)"
    )
    telemetry_max_age_s: float = option(
        3 * 86_400.0, "segments, logs and meters time-stamped longer ago than this are refused"
    )
    telemetry_max_ahead_s: float = option(
        600.0, "segments, logs and meters time-stamped further ahead of the node's clock are refused"
    )

    def items(self) -> TelemetryLimits:
        """The rules every item is checked against, at the edge and at the RemoteService."""
        return TelemetryLimits(
            self.max_name_length,
            int(self.telemetry_max_age_s * 1000),
            int(self.telemetry_max_ahead_s * 1000),
            self.max_properties_chars,
            self.max_spans_per_segment,
            self.max_refs_per_span,
            self.max_tags_per_item,
            self.max_log_body_bytes,
            self.max_histogram_buckets,
        )

    def check(self) -> None:
        if self.memory_limit_mb < 1:
            raise ValueError(f"--memory-limit-mb must be at least 1, not {self.memory_limit_mb}")
        if self.call_deadline_s <= 0:
            raise ValueError(
                f"--call-deadline-s must be above 0, not {self.call_deadline_s:g}: "
                "calls wait that long for room and for storage"
            )
        for name in (
            "max_spans_per_segment", "max_refs_per_span", "max_tags_per_item", "max_log_body_bytes",
            "max_histogram_buckets", "max_endpoints_per_service", "max_instances_per_service",
            "max_network_addresses", "max_services",
        ):  # fmt: skip
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, not {value}")


@dataclass(frozen=True)
class TopicsConfig:
    partitions: int = option(
        4, "partitions of each topic, fixed when storage first creates the topic", name="topic_partitions"
    )
    retention_s: float = option(
        3 * 86_400.0,
        "the inventory and metrics topics keep versions younger than this (whole days of the rows' "
        "history are dropped; rows stay stored, below the start); segments, logs and alarms are "
        "their own topics, kept --records-ttl-days",
        name="topic_retention_s",
    )
    retention_records: int = option(
        10_000_000,
        "most offsets a partition of the inventory or metrics topic keeps readable "
        "(segments and logs: by day only)",
        name="topic_retention_records",
    )
    publish: bool = option(True, "publish what L2 stores on the topics", name="publish_topics")
    commit_interval_s: float = option(
        0.5,
        "how often what was written (records and row versions) is made readable on the topics",
        name="topic_commit_interval_s",
    )

    def check(self) -> None:
        if self.commit_interval_s <= 0:
            raise ValueError(f"--topic-commit-interval-s must be above 0, not {self.commit_interval_s:g}")


@dataclass(frozen=True)
class TtlConfig:
    """How long data is kept, in whole days (UTC): a day's data goes once the
    day is that many days ago. Aggregators remove it, one at a time."""

    records_days: int = option(
        3, "segments, logs and alarms (and their topics) are kept this many days", name="records_ttl_days"
    )
    minute_metrics_days: int = option(
        1, "minute metrics are kept this many days", name="minute_metrics_ttl_days"
    )
    hour_metrics_days: int = option(7, "hour metrics are kept this many days", name="hour_metrics_ttl_days")
    day_metrics_days: int = option(90, "day metrics are kept this many days", name="day_metrics_ttl_days")
    inactive_instance_days: int = option(
        7,
        "an inactive instance is removed this many days after its last heartbeat",
        name="inactive_instance_ttl_days",
    )
    unused_endpoint_days: int = option(
        7,
        "an endpoint is removed once it was registered this many days ago and no day metric of "
        "these days measured it (at most --day-metrics-ttl-days)",
        name="unused_endpoint_ttl_days",
    )
    interval_s: float = option(
        600.0, "how often aggregators look for data past its time to live", name="ttl_interval_s"
    )

    def check(self) -> None:
        if self.interval_s <= 0:
            raise ValueError(f"--ttl-interval-s must be above 0, not {self.interval_s:g}")
        for field in dataclasses.fields(self):
            days = getattr(self, field.name)
            if field.name.endswith("_days") and days < 1:
                flag = "--" + option_name(field).replace("_", "-")
                raise ValueError(f"{flag} must be at least 1, not {days}")
        if self.unused_endpoint_days > self.day_metrics_days:
            raise ValueError(
                f"--unused-endpoint-ttl-days ({self.unused_endpoint_days}) must be at most "
                f"--day-metrics-ttl-days ({self.day_metrics_days}): endpoints are found unused "
                "by their day metrics"
            )

    def as_read(self) -> TimesToLive:
        """The times to live as the query endpoint answers and applies them."""
        return TimesToLive(
            self.records_days,
            self.minute_metrics_days,
            self.hour_metrics_days,
            self.day_metrics_days,
            self.inactive_instance_days,
        )

    def ttl(self) -> Ttl:
        """The times to live (of a checked section)."""
        metrics = {
            Downsampling.MINUTE: self.minute_metrics_days,
            Downsampling.HOUR: self.hour_metrics_days,
            Downsampling.DAY: self.day_metrics_days,
        }
        return Ttl(self.records_days, metrics, self.inactive_instance_days, self.unused_endpoint_days)


@dataclass(frozen=True)
class AnalysisConfig:
    """How telemetry becomes metrics."""

    apdex_thresholds: str = option(
        "",
        "file of each service's apdex threshold in ms, as SkyWalking's service-apdex-threshold.yml: "
        "lines 'SERVICE: MS' and 'default: MS' (500 ms when not given)",
    )

    otlp_caller_wait_s: float = option(
        10.0,
        "how long an OTLP entry span waits for its parent span (of the service that called it), "
        "whose names its relations need; past it no relation is counted for it",
    )

    alias_refresh_s: float = option(
        10.0,
        "how often a node that takes agent traffic reads from storage the network address aliases "
        "other nodes learned (an entry span names the address its caller used; exit spans to it "
        "are then measured as calls to its service); what it learns itself it uses at once",
    )

    searchable_trace_tags: str = option(
        ",".join(SEARCHABLE_TRACE_TAGS),
        "span tag keys traces are searched by, comma separated (SkyWalking's searchableTracesTags): "
        "a segment's tags of these keys are stored with it, and queryBasicTraces finds it by them",
    )

    searchable_log_tags: str = option(
        ",".join(SEARCHABLE_LOG_TAGS),
        "log tag keys log lines are searched by, comma separated (SkyWalking's searchableLogsTags): "
        "a line's tags of these keys are stored to search by, and queryLogs finds it by them",
    )

    slow_db_access_threshold: str = option(
        "default:200,mongodb:100",
        "latency in ms past which a database statement is sampled as slow, by db.type, as "
        "SkyWalking's slowDBAccessThreshold: 'default:MS,TYPE:MS,...'",
    )

    slow_cache_read_threshold: str = option(
        "default:20,redis:10",
        "latency in ms past which a cache read is sampled as slow, by cache.type, as "
        "SkyWalking's slowCacheReadThreshold",
    )

    slow_cache_write_threshold: str = option(
        "default:20,redis:10",
        "latency in ms past which a cache write is sampled as slow, by cache.type, as "
        "SkyWalking's slowCacheWriteThreshold",
    )

    trace_sampling_settings: str = option(
        "",
        "SkyWalking's trace-sampling-policy-settings.yml, read as is: a default rate and per-service "
        "rates in 1/10000 of traces whose segments are stored, decided by the trace id alike on every "
        "node, and a duration in ms past which a segment is stored anyway; segments with errors are "
        "always stored, and every segment is measured; a file changed on disk is read again "
        "(none: every segment is stored)",
    )

    trace_sampling_reload_s: float = option(
        10.0, "how often the trace sampling settings file is looked at for changes"
    )

    def slow(self) -> SlowThresholds:
        """The thresholds of the ``--slow-*-threshold`` options; ValueError saying which is wrong."""
        return SlowThresholds(
            Thresholds.parse(self.slow_db_access_threshold, "--slow-db-access-threshold"),
            Thresholds.parse(self.slow_cache_read_threshold, "--slow-cache-read-threshold"),
            Thresholds.parse(self.slow_cache_write_threshold, "--slow-cache-write-threshold"),
        )

    def searchable_tags(self) -> frozenset[str]:
        """The keys of ``--searchable-trace-tags``."""
        return _keys(self.searchable_trace_tags)

    def log_tags(self) -> frozenset[str]:
        """The keys of ``--searchable-log-tags``."""
        return _keys(self.searchable_log_tags)

    def apdex(self) -> ApdexThresholds:
        """The thresholds of ``--apdex-thresholds``; ValueError for a file that cannot be read as one."""
        if not self.apdex_thresholds:
            return ApdexThresholds()
        path = Path(self.apdex_thresholds)
        try:
            text = path.read_text()
        except OSError as e:
            raise ValueError(f"--apdex-thresholds: cannot read {path}: {e.strerror}") from e
        return ApdexThresholds.parse(text, f"--apdex-thresholds {path}")

    def check(self) -> None:
        self.slow()
        if self.otlp_caller_wait_s <= 0:
            raise ValueError(f"--otlp-caller-wait-s must be above 0, not {self.otlp_caller_wait_s:g}")
        if self.alias_refresh_s <= 0:
            raise ValueError(f"--alias-refresh-s must be above 0, not {self.alias_refresh_s:g}")
        if self.trace_sampling_reload_s <= 0:
            raise ValueError(
                f"--trace-sampling-reload-s must be above 0, not {self.trace_sampling_reload_s:g}"
            )
        if self.trace_sampling_settings:
            sampling.load(Path(self.trace_sampling_settings))
        for flag, keys in (
            ("--searchable-trace-tags", self.searchable_tags()),
            ("--searchable-log-tags", self.log_tags()),
        ):
            for key in keys:
                if "=" in key:
                    raise ValueError(
                        f"{flag}: {key!r} is not a tag key (keys are comma separated, with no values)"
                    )


def _keys(text: str) -> frozenset[str]:
    """The comma-separated keys of ``text``, blanks dropped."""
    return frozenset(k.strip() for k in text.split(",") if k.strip())


@dataclass(frozen=True)
class AlarmConfig:
    """Alarm rules over the minute metrics, evaluated by the aggregators."""

    settings: str = option(
        "",
        "SkyWalking's alarm-settings.yml, read as is: rules (MQE expressions, or the older metrics-name, "
        "op, threshold, count) and hooks (webhook, slack, wechat, dingtalk, feishu, pagerduty, discord); "
        "a file with an error refuses the start; a file changed on disk is read again (none: no alarms)",
        name="alarm_settings",
    )
    reload_s: float = option(
        10.0, "how often the alarm settings file is looked at for changes", name="alarm_reload_s"
    )
    settle_s: float = option(
        30.0,
        "seconds after a minute ends before its alarms are evaluated: time for its metrics to be persisted",
        name="alarm_settle_s",
    )
    hook_timeout_s: float = option(5.0, "how long one send to a hook may take, all of it: connecting, "
                                        "sending and the answer", name="alarm_hook_timeout_s")  # fmt: skip
    max_queued: int = option(10_000, "alarm notices waiting to be sent to each hook URL, at most; more are "
                                     "dropped (counted)", name="alarm_max_queued")  # fmt: skip

    def check(self) -> None:
        for name, value in (
            ("--alarm-reload-s", self.reload_s),
            ("--alarm-hook-timeout-s", self.hook_timeout_s),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be above 0, not {value:g}")
        if self.settle_s < 0:
            raise ValueError(f"--alarm-settle-s must be at least 0, not {self.settle_s:g}")
        if self.max_queued < 1:
            raise ValueError(f"--alarm-max-queued must be at least 1, not {self.max_queued}")
        if self.settings:
            try:
                load_checked(Path(self.settings))
            except SettingsError as e:
                raise ValueError(f"--alarm-settings {e}") from None


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


def _check_metadata(option: str, value: str) -> None:
    if value and not (value.isascii() and value.isprintable()):
        raise ValueError(
            f"{option} must be printable ASCII: it travels as gRPC metadata, which carries nothing else"
        )
